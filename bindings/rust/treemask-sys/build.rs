//! Finds libtreemask and tells cargo how to link it.
//!
//! Where it looks, first match wins:
//! 1. `TREEMASK_LIB_DIR` (unset or empty: skipped): the directory holding
//!    libtreemask (plus `TREEMASK_INCLUDE_DIR`, the one holding
//!    `treemask/treemask.h`, if dependents compile C against it).
//! 2. `TREEMASK_MESON_BUILD_DIR`: a meson build directory of this repository
//!    (`meson test` sets it); the library is in its `src/`.
//! 3. The `pkg-config` program (or `$PKG_CONFIG`), package `treemask`, which
//!    honours `PKG_CONFIG_PATH` as usual.
//!
//! No registry crate is used (no `pkg-config` crate): the bindings must build
//! with `cargo --offline` on a machine that has never fetched anything.
//
// Copyright 2026 The treemask Authors. SPDX-License-Identifier: Apache-2.0
use std::env;
use std::path::{Path, PathBuf};
use std::process::Command;

/// Where the library was found.
struct Location {
    /// The directory holding libtreemask; None when it sits in a directory
    /// the linker searches anyway (pkg-config then prints no `-L`).
    lib_dir: Option<PathBuf>,
    /// Other `-L` directories pkg-config asked for.
    extra_lib_dirs: Vec<PathBuf>,
    include_dir: Option<PathBuf>,
}

const HOW_TO_POINT: &str = "\
treemask-sys: cannot find libtreemask. Point the build at it in one of these ways:
  - set TREEMASK_LIB_DIR to the directory holding libtreemask.so (for a meson
    build of this repository: <build>/src), and optionally TREEMASK_INCLUDE_DIR
    to the directory holding treemask/treemask.h;
  - set TREEMASK_MESON_BUILD_DIR to a meson build directory of treemask;
  - install treemask (`meson install`) so that `pkg-config --libs treemask`
    works, adding its lib/pkgconfig directory to PKG_CONFIG_PATH if needed.";

fn main() {
    for var in [
        "TREEMASK_LIB_DIR",
        "TREEMASK_INCLUDE_DIR",
        "TREEMASK_MESON_BUILD_DIR",
        "PKG_CONFIG",
        "PKG_CONFIG_PATH",
        "PKG_CONFIG_LIBDIR",
        "PKG_CONFIG_SYSROOT_DIR",
    ] {
        println!("cargo:rerun-if-env-changed={var}");
    }
    println!("cargo:rerun-if-changed=build.rs");

    let location = match locate() {
        Ok(location) => location,
        Err(why) => {
            eprintln!("{HOW_TO_POINT}\n\nWhat was tried: {why}");
            std::process::exit(1);
        }
    };
    for dir in location.lib_dir.iter().chain(&location.extra_lib_dirs) {
        println!("cargo:rustc-link-search=native={}", dir.display());
    }
    println!("cargo:rustc-link-lib=dylib=treemask");
    // Metadata for dependents' build scripts (DEP_TREEMASK_*): the treemask
    // crate turns lib_dir into an rpath for its tests and examples.
    if let Some(dir) = &location.lib_dir {
        println!("cargo:lib_dir={}", dir.display());
    }
    if let Some(dir) = &location.include_dir {
        println!("cargo:include={}", dir.display());
    }
}

fn locate() -> Result<Location, String> {
    let include_override = path_from_env("TREEMASK_INCLUDE_DIR");
    if let Some(dir) = path_from_env("TREEMASK_LIB_DIR") {
        return Ok(Location {
            lib_dir: Some(require_library(&dir, "TREEMASK_LIB_DIR")?),
            extra_lib_dirs: Vec::new(),
            include_dir: include_override,
        });
    }
    if let Some(build) = path_from_env("TREEMASK_MESON_BUILD_DIR") {
        let dir = require_library(&build.join("src"), "TREEMASK_MESON_BUILD_DIR")?;
        return Ok(Location {
            lib_dir: Some(dir),
            extra_lib_dirs: Vec::new(),
            include_dir: include_override.or_else(source_tree_include_dir),
        });
    }
    let mut location = pkg_config()?;
    if include_override.is_some() {
        location.include_dir = include_override;
    }
    Ok(location)
}

/// The path in `var`; unset and empty are the same, so that a caller (meson)
/// can switch off a variable it cannot remove from the environment.
fn path_from_env(var: &str) -> Option<PathBuf> {
    env::var_os(var)
        .filter(|value| !value.is_empty())
        .map(PathBuf::from)
}

fn library_file_names() -> &'static [&'static str] {
    match env::var("CARGO_CFG_TARGET_OS").as_deref() {
        Ok("macos") | Ok("ios") => &["libtreemask.dylib"],
        Ok("windows") => &["treemask.lib", "libtreemask.dll.a"],
        _ => &["libtreemask.so"],
    }
}

/// `dir` made absolute (it becomes an rpath, which must not depend on the
/// working directory of the program that uses it), if it holds the library.
fn require_library(dir: &Path, set_by: &str) -> Result<PathBuf, String> {
    let names = library_file_names();
    if names.iter().any(|name| dir.join(name).exists()) {
        return dir
            .canonicalize()
            .map_err(|e| format!("{set_by} gives {}: {e}", dir.display()));
    }
    Err(format!(
        "{set_by} gives {}, which holds no {} (build the library first, or fix the path)",
        dir.display(),
        names.join(" or ")
    ))
}

/// The `include/` of the repository this crate sits in, when it does.
fn source_tree_include_dir() -> Option<PathBuf> {
    let manifest_dir = PathBuf::from(env::var_os("CARGO_MANIFEST_DIR")?);
    let include = manifest_dir.join("../../../include").canonicalize().ok()?;
    include
        .join("treemask/treemask.h")
        .exists()
        .then_some(include)
}

fn pkg_config() -> Result<Location, String> {
    let program = env::var("PKG_CONFIG").unwrap_or_else(|_| "pkg-config".to_string());
    let output = Command::new(&program)
        .args(["--libs-only-L", "--cflags-only-I", "treemask"])
        .output()
        .map_err(|e| format!("TREEMASK_LIB_DIR and TREEMASK_MESON_BUILD_DIR are unset, and running `{program}` failed: {e}"))?;
    if !output.status.success() {
        return Err(format!(
            "TREEMASK_LIB_DIR and TREEMASK_MESON_BUILD_DIR are unset, and `{program} --libs-only-L --cflags-only-I treemask` failed: {}",
            String::from_utf8_lossy(&output.stderr).trim()
        ));
    }
    let flags = String::from_utf8_lossy(&output.stdout);
    let mut lib_dirs = Vec::new();
    let mut include_dir = None;
    for flag in flags.split_whitespace() {
        if let Some(dir) = flag.strip_prefix("-L") {
            lib_dirs.push(PathBuf::from(dir));
        } else if let Some(dir) = flag.strip_prefix("-I") {
            include_dir = include_dir.or_else(|| Some(PathBuf::from(dir)));
        }
    }
    let names = library_file_names();
    let holder = lib_dirs
        .iter()
        .position(|dir| names.iter().any(|name| dir.join(name).exists()));
    let lib_dir = holder.map(|i| lib_dirs.remove(i));
    Ok(Location {
        lib_dir,
        extra_lib_dirs: lib_dirs,
        include_dir,
    })
}
