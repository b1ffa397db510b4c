//! Gives this crate's tests, doctests and examples an rpath to the
//! libtreemask that treemask-sys linked, so they run without
//! LD_LIBRARY_PATH. Cargo applies rustc-link-arg to the package that prints
//! it only, so the directory is also passed on as metadata: a crate that
//! depends on this one reads DEP_TREEMASK_RS_LIB_DIR in its build script and
//! prints the same rpath (README.md, "Finding libtreemask").
//
// Copyright 2026 The treemask Authors. SPDX-License-Identifier: Apache-2.0
use std::env;

fn main() {
    println!("cargo:rerun-if-env-changed=DEP_TREEMASK_LIB_DIR");
    println!("cargo:rerun-if-changed=build.rs");
    let windows = env::var("CARGO_CFG_TARGET_OS").as_deref() == Ok("windows");
    if let (Ok(dir), false) = (env::var("DEP_TREEMASK_LIB_DIR"), windows) {
        println!("cargo:rustc-link-arg=-Wl,-rpath,{dir}");
    }
    if let Ok(dir) = env::var("DEP_TREEMASK_LIB_DIR") {
        println!("cargo:lib_dir={dir}");
    }
}
