//! Links glibc's unwinder (libgcc_s.so.1) into the extension when it is linked by zig
//! (`maturin build --zig`, the manylinux wheels).
//!
//! Why: Rust's std links `-lgcc_s` on linux-gnu, but the zig linker wrapper replaces it with zig's
//! own static libunwind. When Python (< 3.14) finalises while a daemon thread is inside the core
//! with the GIL released, the thread leaves through `pthread_exit`, whose forced unwind runs in
//! the libgcc_s that glibc loads; it then calls the personality routine of our Rust frames, which
//! reads the unwind context through the private libunwind: a different context layout, so a
//! SIGSEGV (tests/faults/test_unwind.py). With libgcc_s.so.1 on the link line (before zig's
//! libunwind, which zig appends last) both sides use the one unwinder glibc uses.
//!
//! Builds with the system linker (pip install from the sdist, `maturin develop`) are left as they
//! are: they already link libgcc_s. musl has no forced unwind in pthread_exit.

use std::env;
use std::path::PathBuf;

fn main() {
    println!("cargo:rerun-if-env-changed=ACP_FAST_LIBGCC_S");
    println!("cargo:rerun-if-env-changed=RUSTC_LINKER");
    let var = |name: &str| env::var(name).unwrap_or_default();
    if var("CARGO_CFG_TARGET_OS") != "linux" || var("CARGO_CFG_TARGET_ENV") != "gnu" {
        return;
    }
    if !var("RUSTC_LINKER").contains("zig") {
        return;
    }
    let arch = var("CARGO_CFG_TARGET_ARCH");
    let path = libgcc_s(&arch).unwrap_or_else(|| {
        panic!(
            "a zig-linked linux-gnu build needs glibc's libgcc_s.so.1 for {arch} (see build.rs); \
             install it (Debian: libgcc-s1, or libgcc-s1-{}-cross) or set ACP_FAST_LIBGCC_S",
            debian_arch(&arch)
        )
    });
    println!("cargo:rerun-if-changed={}", path.display());
    println!("cargo:rustc-link-arg-cdylib={}", path.display());
}

fn debian_arch(arch: &str) -> &str {
    match arch {
        "x86_64" => "amd64",
        "aarch64" => "arm64",
        other => other,
    }
}

/// The target's libgcc_s.so.1: the explicit one, else where Debian and Fedora put it (native or
/// from the cross packages).
fn libgcc_s(arch: &str) -> Option<PathBuf> {
    if let Some(path) = env::var_os("ACP_FAST_LIBGCC_S") {
        return Some(PathBuf::from(path));
    }
    let triple = format!("{arch}-linux-gnu");
    let mut candidates = vec![
        format!("/usr/lib/{triple}/libgcc_s.so.1"),
        format!("/lib/{triple}/libgcc_s.so.1"),
        format!("/usr/{triple}/lib/libgcc_s.so.1"),
    ];
    if env::consts::ARCH == arch {
        candidates.push("/usr/lib64/libgcc_s.so.1".into());
        candidates.push("/lib64/libgcc_s.so.1".into());
    }
    candidates
        .into_iter()
        .map(PathBuf::from)
        .find(|path| path.is_file())
}
