//! Gives this crate's tests, doctests and examples an rpath to the
//! libtreemask that treemask-sys linked, so they run without
//! LD_LIBRARY_PATH. (Cargo applies rustc-link-arg to the package that prints
//! it only; a binary of yours that links a libtreemask outside the system
//! library path needs its own rpath or LD_LIBRARY_PATH.)
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
}
