//! Links the `toolforge` binary with the functions a gateway runs placed together.
//!
//! `link-order.txt` lists them, hottest first; `benchmarks/proxy/link_order.py` writes it from a
//! profile. The kernel maps a binary's code in blocks of up to 128 KB around each page a process
//! runs, so without the list the gateway's few MB of hot code, spread over 30-40 MB, kept 20-25
//! MB of the file resident; with it, about 7 MB. The names are portable between checkouts
//! because the release profile builds one codegen unit per crate (no `.llvm.<hash>` suffixes),
//! but not between compiler versions or `Cargo.lock`s: regenerate the list after such changes.
//!
//! Only release builds for `x86_64-unknown-linux-gnu`, where rustc 1.90 and later link with its
//! own lld by default, get the list: another linker may not know the option. A configured
//! linker or `TOOLFORGE_LINK_ORDER=off` leaves it out too. Names the build no longer has are
//! skipped by the linker, so a stale list costs memory, never a failed build.

// A build script's inputs are the environment variables cargo sets for it.
#![allow(clippy::disallowed_methods)]

use std::env;
use std::path::Path;
use std::process::Command;

const ORDER_FILE: &str = "link-order.txt";

fn main() {
    println!("cargo:rerun-if-changed={ORDER_FILE}");
    println!("cargo:rerun-if-env-changed=TOOLFORGE_LINK_ORDER");
    let path = Path::new(&env::var("CARGO_MANIFEST_DIR").unwrap_or_default()).join(ORDER_FILE);
    if let Some(path) = path.to_str().filter(|_| linker_takes_order_file())
        && path.is_ascii()
        && !path.contains(',')
        && Path::new(path).is_file()
    {
        println!("cargo:rustc-link-arg-bins=-Wl,--symbol-ordering-file={path}");
        println!("cargo:rustc-link-arg-bins=-Wl,--no-warn-symbol-ordering");
    }
}

/// True when this build links a release binary with rustc's own lld.
fn linker_takes_order_file() -> bool {
    let var = |name: &str| env::var(name).unwrap_or_default();
    var("TOOLFORGE_LINK_ORDER") != "off"
        && var("PROFILE") == "release"
        && var("TARGET") == "x86_64-unknown-linux-gnu"
        && var("RUSTC_LINKER").is_empty()
        && var("CARGO_TARGET_X86_64_UNKNOWN_LINUX_GNU_LINKER").is_empty()
        && !var("CARGO_ENCODED_RUSTFLAGS").contains("link")
        && rustc_minor_version().is_some_and(|minor| minor >= 90)
}

/// The minor version of the compiler building this crate (`rustc 1.95.0 (...)` -> 95).
fn rustc_minor_version() -> Option<u32> {
    let rustc = env::var("RUSTC").unwrap_or_else(|_| "rustc".to_owned());
    let out = Command::new(rustc).arg("--version").output().ok()?;
    let text = String::from_utf8(out.stdout).ok()?;
    text.split_whitespace()
        .nth(1)?
        .split('.')
        .nth(1)?
        .parse()
        .ok()
}
