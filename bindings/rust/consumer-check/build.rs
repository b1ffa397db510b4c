// What a crate depending on `treemask` adds so that its binaries find the
// libtreemask that was linked (bindings/rust/treemask/README.md, "Finding libtreemask").
//
// Copyright 2026 The treemask Authors. SPDX-License-Identifier: Apache-2.0
fn main() {
    println!("cargo:rerun-if-env-changed=DEP_TREEMASK_RS_LIB_DIR");
    if let Ok(dir) = std::env::var("DEP_TREEMASK_RS_LIB_DIR") {
        println!("cargo:rustc-link-arg=-Wl,-rpath,{dir}");
    }
}
