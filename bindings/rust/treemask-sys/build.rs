//! Builds or finds libtreemask and tells cargo how to link it.
//!
//! First match wins:
//! 1. `TREEMASK_LIB_DIR` (unset or empty: skipped): link the libtreemask.so
//!    in that directory (plus `TREEMASK_INCLUDE_DIR`, the one holding
//!    `treemask/treemask.h`, if dependents compile C against it).
//! 2. `TREEMASK_MESON_BUILD_DIR`: a meson build directory of this repository
//!    (`meson test` sets it); the library is in its `src/`.
//! 3. The `bundled` feature (default), unless `TREEMASK_SYS_USE_PKG_CONFIG=1`:
//!    compile the library from the sources packaged in this crate (`csrc/`)
//!    with the C++ compiler (`$CXX`, else `c++`; C++20) and link it
//!    statically. As in the `cc` crate, `$CXX` (and `$AR`) may hold a
//!    wrapper: split on whitespace, the first word is the program and the
//!    rest its leading arguments (`CXX="ccache g++"`). The JSON loaders are in when pkg-config finds simdjson
//!    (Debian: libsimdjson-dev), else they return TREEMASK_ERR_UNSUPPORTED;
//!    the CUDA entry points always return TREEMASK_ERR_UNSUPPORTED (link a
//!    CUDA build of libtreemask through 1 or 4 for them).
//! 4. The `pkg-config` program (or `$PKG_CONFIG`), package `treemask`, which
//!    honours `PKG_CONFIG_PATH` as usual.
//!
//! No registry crate is used (no `cc` or `pkg-config` crate): the bindings
//! must build with `cargo --offline` on a machine that has never fetched
//! anything.
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
    /// Built from the packaged sources and linked statically.
    bundled: bool,
}

const HOW_TO_POINT: &str = "\
treemask-sys: cannot find libtreemask. Point the build at it in one of these ways:
  - set TREEMASK_LIB_DIR to the directory holding libtreemask.so (for a meson
    build of this repository: <build>/src), and optionally TREEMASK_INCLUDE_DIR
    to the directory holding treemask/treemask.h;
  - set TREEMASK_MESON_BUILD_DIR to a meson build directory of treemask;
  - install treemask (`meson install`) so that `pkg-config --libs treemask`
    works, adding its lib/pkgconfig directory to PKG_CONFIG_PATH if needed.";

const BUNDLED_FAILED: &str = "\
treemask-sys: building the bundled libtreemask (the `bundled` feature) failed.
To link an installed libtreemask instead, set TREEMASK_LIB_DIR, or
TREEMASK_SYS_USE_PKG_CONFIG=1 (or default-features = false) for pkg-config.";

/// Why no library: none was found where the build looked, or building the
/// bundled one failed (its own message: which command, which file).
enum Failure {
    NotFound(String),
    Bundled(String),
}

fn main() {
    for var in [
        "TREEMASK_LIB_DIR",
        "TREEMASK_INCLUDE_DIR",
        "TREEMASK_MESON_BUILD_DIR",
        "PKG_CONFIG",
        "PKG_CONFIG_PATH",
        "PKG_CONFIG_LIBDIR",
        "PKG_CONFIG_SYSROOT_DIR",
        "TREEMASK_SYS_USE_PKG_CONFIG",
        "TREEMASK_SYS_SHARED_STDCXX",
        "CXX",
        "AR",
    ] {
        println!("cargo:rerun-if-env-changed={var}");
    }
    println!("cargo:rerun-if-changed=build.rs");

    let location = match locate() {
        Ok(location) => location,
        Err(Failure::NotFound(why)) => {
            eprintln!("{HOW_TO_POINT}\n\nWhat was tried: {why}");
            std::process::exit(1);
        }
        Err(Failure::Bundled(why)) => {
            eprintln!("{BUNDLED_FAILED}\n\n{why}");
            std::process::exit(1);
        }
    };
    for dir in location.lib_dir.iter().chain(&location.extra_lib_dirs) {
        println!("cargo:rustc-link-search=native={}", dir.display());
    }
    if location.bundled {
        // bundled() printed the static library and what it needs.
        if let Some(dir) = &location.include_dir {
            println!("cargo:include={}", dir.display());
        }
        return;
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

fn locate() -> Result<Location, Failure> {
    let include_override = path_from_env("TREEMASK_INCLUDE_DIR");
    if let Some(dir) = path_from_env("TREEMASK_LIB_DIR") {
        return Ok(Location {
            lib_dir: Some(require_library(&dir, "TREEMASK_LIB_DIR").map_err(Failure::NotFound)?),
            extra_lib_dirs: Vec::new(),
            include_dir: include_override,
            bundled: false,
        });
    }
    if let Some(build) = path_from_env("TREEMASK_MESON_BUILD_DIR") {
        let dir = require_library(&build.join("src"), "TREEMASK_MESON_BUILD_DIR")
            .map_err(Failure::NotFound)?;
        return Ok(Location {
            lib_dir: Some(dir),
            extra_lib_dirs: Vec::new(),
            include_dir: include_override.or_else(source_tree_include_dir),
            bundled: false,
        });
    }
    let use_pkg_config = env::var("TREEMASK_SYS_USE_PKG_CONFIG").map_or(false, |v| v == "1");
    if env::var_os("CARGO_FEATURE_BUNDLED").is_some() && !use_pkg_config {
        return bundled::build().map_err(Failure::Bundled);
    }
    let mut location = pkg_config().map_err(Failure::NotFound)?;
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
        bundled: false,
    })
}

/// The `bundled` feature: libtreemask compiled from `csrc/` (links to the
/// repository's `src/` and `include/` in a checkout, copies in the package).
mod bundled {
    use super::{show, static_stdcxx, Location, Tool};
    use std::env;
    use std::fs;
    use std::path::{Path, PathBuf};
    use std::process::Child;

    pub fn build() -> Result<Location, String> {
        let manifest_dir =
            PathBuf::from(env::var_os("CARGO_MANIFEST_DIR").ok_or("CARGO_MANIFEST_DIR unset")?);
        let csrc = manifest_dir.join("csrc");
        let (src, include) = (csrc.join("src"), csrc.join("include"));
        if !include.join("treemask/treemask.h").is_file() || !src.is_dir() {
            return Err(format!(
                "the `bundled` feature needs the library's sources in {} (src/ and include/), which are \
                 missing; link an installed libtreemask instead (TREEMASK_LIB_DIR, or \
                 TREEMASK_SYS_USE_PKG_CONFIG=1 / default-features = false for pkg-config)",
                csrc.display()
            ));
        }
        println!("cargo:rerun-if-changed={}", src.display());
        println!("cargo:rerun-if-changed={}", include.display());
        let out = PathBuf::from(env::var_os("OUT_DIR").ok_or("OUT_DIR unset")?).join("treemask");
        fs::create_dir_all(&out).map_err(|e| format!("{}: {e}", out.display()))?;

        let simdjson = super::pkg_config_flags("simdjson");
        let mut sources = Vec::new();
        collect_sources(&src, &src, &mut sources)?;
        sources.retain(|path| keep(&src, path, simdjson.is_some()));
        sources.sort();
        if sources.is_empty() {
            return Err(format!("no C++ sources under {}", src.display()));
        }
        if simdjson.is_none() {
            println!(
                "cargo:warning=treemask-sys: pkg-config found no simdjson (Debian: libsimdjson-dev): \
                 the JSON loaders return TREEMASK_ERR_UNSUPPORTED"
            );
        }

        let cxx = Tool::from_env("CXX", "c++")?;
        let opt = match env::var("OPT_LEVEL").as_deref() {
            Ok("0") => "-O1", // -O0 would make the tests crawl; -O1 compiles nearly as fast
            Ok("1") => "-O1",
            Ok("s") => "-Os",
            Ok("z") => "-Os",
            _ => "-O2",
        };
        let mut flags: Vec<String> = vec![
            "-std=c++20".into(),
            opt.into(),
            "-fPIC".into(),
            "-fvisibility=hidden".into(),
            "-pthread".into(),
            "-w".into(),
            "-DTREEMASK_BUILDING_LIBRARY".into(),
            "-DTREEMASK_EXPERIMENTAL".into(),
            "-DTREEMASK_STATIC".into(),
            // The library's own asserts are for its development builds, as in
            // meson's release build.
            "-DNDEBUG".into(),
            format!("-I{}", src.display()),
            format!("-I{}", include.display()),
        ];
        if let Some(simdjson) = &simdjson {
            flags.extend(simdjson.cflags.iter().cloned());
        }
        let jobs: usize = env::var("NUM_JOBS")
            .ok()
            .and_then(|n| n.parse().ok())
            .unwrap_or(2)
            .max(1);
        // One translation unit per directory (the standard headers parsed
        // once for all its files; meson's unity build of the library, the
        // same idea, took 89 CPU seconds instead of 157); a unit that
        // does not compile falls back to its files one by one, so only a
        // file's own error fails the build.
        let mut queue: Vec<Unit> = units(&src, &sources, &out)?;
        queue.reverse();
        let mut objects = Vec::new();
        let mut running: Vec<(Child, Unit, String)> = Vec::new();
        while !queue.is_empty() || !running.is_empty() {
            while running.len() < jobs {
                let unit = match queue.pop() {
                    Some(unit) => unit,
                    None => break,
                };
                let mut cmd = cxx.command();
                cmd.args(&flags)
                    .arg("-c")
                    .arg(&unit.source)
                    .arg("-o")
                    .arg(&unit.object);
                if unit.files.len() > 1 {
                    // Its errors are not the user's: the files are retried.
                    cmd.stderr(std::process::Stdio::null());
                }
                let child = cmd.spawn().map_err(|e| {
                    format!(
                        "cannot run the C++ compiler `{}` ({}) to compile {}: {e}\n  command: {}",
                        cxx.program,
                        cxx.origin,
                        unit.source.display(),
                        show(&cmd)
                    )
                })?;
                running.push((child, unit, show(&cmd)));
            }
            let (mut child, unit, line) = running.remove(0);
            let status = child
                .wait()
                .map_err(|e| format!("waiting for the C++ compiler ({line}): {e}"))?;
            if status.success() {
                objects.push(unit.object);
            } else if unit.files.len() > 1 {
                println!(
                    "cargo:warning=treemask-sys: {} does not compile as one unit: its {} files one by one",
                    unit.source.display(),
                    unit.files.len()
                );
                for file in unit.files.iter().rev() {
                    queue.push(single(&src, file, &out));
                }
            } else {
                for (mut other, _, _) in running.drain(..) {
                    let _ = other.wait();
                }
                return Err(format!(
                    "compiling {} failed ({status}; {}); treemask needs a C++20 compiler \
                     (g++ >= 12 or clang >= 16; set CXX)\n  command: {line}",
                    unit.source.display(),
                    cxx.origin
                ));
            }
        }
        let archive = out.join("libtreemask.a");
        let _ = fs::remove_file(&archive);
        let ar = Tool::from_env("AR", "ar")?;
        let mut cmd = ar.command();
        cmd.arg("crs").arg(&archive).args(&objects);
        let status = cmd.status().map_err(|e| {
            format!(
                "cannot run the archiver `{}` ({}) to write {}: {e}",
                ar.program,
                ar.origin,
                archive.display()
            )
        })?;
        if !status.success() {
            return Err(format!(
                "writing {} failed ({status}; {})\n  command: {}",
                archive.display(),
                ar.origin,
                show(&cmd)
            ));
        }
        println!("cargo:rustc-link-search=native={}", out.display());
        println!("cargo:rustc-link-lib=static=treemask");
        if let Some(simdjson) = &simdjson {
            for lib in &simdjson.libs {
                if let Some(dir) = lib.strip_prefix("-L") {
                    println!("cargo:rustc-link-search=native={dir}");
                } else if let Some(name) = lib.strip_prefix("-l") {
                    println!("cargo:rustc-link-lib=dylib={name}");
                }
            }
        }
        // The C++ runtime (g++'s, which clang uses on Linux too): its static
        // archive, where the compiler has one, so that a bundled program
        // needs no libstdc++.so at run time (TREEMASK_SYS_SHARED_STDCXX=1
        // links the shared one, e.g. beside other C++ libraries that do).
        match static_stdcxx(&cxx) {
            Some(dir) if env::var("TREEMASK_SYS_SHARED_STDCXX").as_deref() != Ok("1") => {
                println!("cargo:rustc-link-search=native={}", dir.display());
                println!("cargo:rustc-link-lib=static=stdc++");
            }
            _ => println!("cargo:rustc-link-lib=dylib=stdc++"),
        }
        println!("cargo:bundled=1");
        Ok(Location {
            lib_dir: None,
            extra_lib_dirs: Vec::new(),
            include_dir: Some(include),
            bundled: true,
        })
    }

    /// What one compiler run makes: an object from a source, which is
    /// either one of the library's files or a unit including several.
    struct Unit {
        source: PathBuf,
        object: PathBuf,
        files: Vec<PathBuf>,
    }

    fn single(src: &Path, file: &Path, out: &Path) -> Unit {
        let rel = file.strip_prefix(src).unwrap_or(file);
        Unit {
            source: file.to_path_buf(),
            object: out.join(rel.to_string_lossy().replace('/', "_") + ".o"),
            files: vec![file.to_path_buf()],
        }
    }

    /// The sources grouped by directory, each group written as one file
    /// that includes them. A file that changes the target ISA for a region
    /// (`#pragma GCC target`: the CPU kernels' AVX2 and AVX-512 variants)
    /// stays alone: in a shared unit, a standard-library function it
    /// instantiates first would carry that ISA into the other files.
    fn units(src: &Path, sources: &[PathBuf], out: &Path) -> Result<Vec<Unit>, String> {
        let mut groups: Vec<(PathBuf, Vec<PathBuf>)> = Vec::new();
        let mut result = Vec::new();
        for file in sources {
            let text = fs::read_to_string(file).map_err(|e| format!("{}: {e}", file.display()))?;
            if text.contains("#pragma GCC target") {
                result.push(single(src, file, out));
                continue;
            }
            let dir = file.parent().unwrap_or(src).to_path_buf();
            match groups.iter_mut().find(|(d, _)| *d == dir) {
                Some((_, files)) => files.push(file.clone()),
                None => groups.push((dir, vec![file.clone()])),
            }
        }
        for (dir, files) in groups {
            if files.len() == 1 {
                result.push(single(src, &files[0], out));
                continue;
            }
            let rel = dir.strip_prefix(src).unwrap_or(&dir);
            let name = format!("unit_{}", rel.to_string_lossy().replace('/', "_"));
            let source = out.join(format!("{name}.cc"));
            let mut text = String::new();
            for file in &files {
                text.push_str(&format!("#include \"{}\"\n", file.display()));
            }
            fs::write(&source, text).map_err(|e| format!("{}: {e}", source.display()))?;
            result.push(Unit {
                object: out.join(format!("{name}.o")),
                source,
                files,
            });
        }
        Ok(result)
    }

    fn collect_sources(root: &Path, dir: &Path, out: &mut Vec<PathBuf>) -> Result<(), String> {
        let entries = fs::read_dir(dir).map_err(|e| format!("{}: {e}", dir.display()))?;
        for entry in entries {
            let path = entry.map_err(|e| format!("{}: {e}", dir.display()))?.path();
            if path.is_dir() {
                // The `treemask` command is a program of its own.
                if path
                    .strip_prefix(root)
                    .map_or(false, |rel| rel == Path::new("cli"))
                {
                    continue;
                }
                collect_sources(root, &path, out)?;
            } else if path.extension().map_or(false, |e| e == "cc") {
                out.push(path);
            }
        }
        Ok(())
    }

    /// Whether a source belongs to a build without CUDA, with or without JSON:
    /// files that include the CUDA runtime are the CUDA build's (its
    /// fallback, bridge_unsupported.cc, includes none); files that include
    /// simdjson or the JSON helpers need simdjson, and json_disabled.cc
    /// stands in for them without it.
    fn keep(_root: &Path, path: &Path, json: bool) -> bool {
        let text = fs::read_to_string(path).unwrap_or_default();
        let includes = |needle: &str| {
            text.lines()
                .any(|line| line.trim_start().starts_with("#include") && line.contains(needle))
        };
        if includes("cuda_runtime") {
            return false;
        }
        let name = path.file_name().and_then(|n| n.to_str()).unwrap_or("");
        if json {
            name != "json_disabled.cc"
        } else {
            !(includes("simdjson") || includes("json_util.h"))
        }
    }
}

/// A tool named by an environment variable, as the `cc` crate reads one:
/// split on whitespace, the first word is the program and the rest its
/// leading arguments (`CXX="ccache g++"`, `CXX="clang++ --target=..."`).
struct Tool {
    /// The variable and its value, or the default used, for messages.
    origin: String,
    program: String,
    leading: Vec<String>,
}

impl Tool {
    fn from_env(var: &str, default: &str) -> Result<Tool, String> {
        let (origin, value) = match env::var(var) {
            Ok(value) if !value.trim().is_empty() => (format!("{var}=\"{value}\""), value),
            Ok(_) | Err(env::VarError::NotPresent) => {
                (format!("{var} unset: {default}"), default.to_string())
            }
            Err(env::VarError::NotUnicode(value)) => {
                return Err(format!("{var} is not UTF-8: {value:?}"));
            }
        };
        let mut words = value.split_whitespace().map(str::to_string);
        let program = words.next().unwrap_or_else(|| default.to_string());
        Ok(Tool {
            origin,
            program,
            leading: words.collect(),
        })
    }

    /// A command running the tool with its leading arguments.
    fn command(&self) -> Command {
        let mut cmd = Command::new(&self.program);
        cmd.args(&self.leading);
        cmd
    }
}

/// The directory of the compiler's libstdc++.a (`CXX -print-file-name`),
/// or None when it has none (the compiler then prints the bare name).
fn static_stdcxx(cxx: &Tool) -> Option<PathBuf> {
    let out = cxx.command().arg("-print-file-name=libstdc++.a").output().ok()?;
    let path = PathBuf::from(String::from_utf8(out.stdout).ok()?.trim());
    if out.status.success() && path.is_absolute() && path.is_file() {
        path.parent().map(Path::to_path_buf)
    } else {
        None
    }
}

/// `cmd` as a shell line, for messages.
fn show(cmd: &Command) -> String {
    std::iter::once(cmd.get_program())
        .chain(cmd.get_args())
        .map(|a| a.to_string_lossy().into_owned())
        .collect::<Vec<_>>()
        .join(" ")
}

/// `pkg-config --cflags` and `--libs` of a package, if pkg-config knows it.
struct PkgFlags {
    cflags: Vec<String>,
    libs: Vec<String>,
}

fn pkg_config_flags(package: &str) -> Option<PkgFlags> {
    let program = env::var("PKG_CONFIG").unwrap_or_else(|_| "pkg-config".to_string());
    let run = |what: &str| -> Option<Vec<String>> {
        let output = Command::new(&program).args([what, package]).output().ok()?;
        output.status.success().then(|| {
            String::from_utf8_lossy(&output.stdout)
                .split_whitespace()
                .map(str::to_string)
                .collect()
        })
    };
    Some(PkgFlags {
        cflags: run("--cflags")?,
        libs: run("--libs")?,
    })
}
