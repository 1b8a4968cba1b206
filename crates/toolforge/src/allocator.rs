//! The process's allocator: jemalloc (feature `jemalloc`, on by default), with settings for a
//! gateway that must stay small.
//!
//! A proxied `tools/call` made about 420 allocations (hyper, axum, rmcp's session and client,
//! serde). glibc's allocator spent about 106,000 instructions per call on them, a fifth of the
//! gateway's; jemalloc's thread caches spend about 38,000 (`benchmarks/proxy/instructions.sh`;
//! `benchmarks/proxy/README.md`, 2026-11-28).
//!
//! The settings ([`CONFIG`]), each measured for RSS on 2 cores with the harness's backend:
//! - `narenas:1`: one automatic arena for every thread. The gateway runs few threads (one
//!   async worker per two cores, blocking threads for SQLite and files), and each arena keeps
//!   its own partly used pages: the default (four per core) left about 1 MB more resident at
//!   c = 32. The thread caches in front of the arena take almost every allocation.
//! - `dirty_decay_ms:1000,muzzy_decay_ms:0`: pages freed for a second go back to the
//!   operating system (the default keeps them ten seconds), so RSS follows what is live, not
//!   the last peak. Without a background thread the decay advances only while the process
//!   allocates; a catalog build's peak is handed back at once anyway (`toolforge_gateway`'s
//!   `free_memory` purges after large builds).
//!
//! An operator overrides them with `_RJEM_MALLOC_CONF` (jemalloc's own syntax), read at start.

/// Whether jemalloc is the global allocator.
pub const JEMALLOC: bool = cfg!(all(feature = "jemalloc", not(target_env = "msvc")));

#[cfg(all(feature = "jemalloc", not(target_env = "msvc")))]
#[global_allocator]
static GLOBAL: tikv_jemallocator::Jemalloc = tikv_jemallocator::Jemalloc;

/// jemalloc's settings, in its `malloc_conf` syntax.
#[cfg(all(feature = "jemalloc", not(target_env = "msvc")))]
const CONFIG: &std::ffi::CStr = c"narenas:1,dirty_decay_ms:1000,muzzy_decay_ms:0";

/// What jemalloc's `const char *malloc_conf` holds: a pointer to a C string.
#[cfg(all(feature = "jemalloc", not(target_env = "msvc")))]
#[repr(transparent)]
pub struct ConfigString(*const std::ffi::c_char);

// SAFETY: the pointer is to a string literal, immutable and alive for the whole program.
#[cfg(all(feature = "jemalloc", not(target_env = "msvc")))]
#[allow(unsafe_code)]
unsafe impl Sync for ConfigString {}

/// jemalloc reads its compiled-in settings from this symbol (a weak one in the library, which
/// this definition replaces); the crate builds jemalloc with the `_rjem_` symbol prefix.
#[cfg(all(feature = "jemalloc", not(target_env = "msvc")))]
#[allow(unsafe_code, non_upper_case_globals)]
// SAFETY: the symbol's type is jemalloc's `const char *`, which `ConfigString` is.
#[unsafe(export_name = "_rjem_malloc_conf")]
pub static malloc_conf: ConfigString = ConfigString(CONFIG.as_ptr());

#[cfg(all(test, feature = "jemalloc", not(target_env = "msvc")))]
mod tests {
    use super::*;

    #[test]
    fn the_settings_are_key_value_pairs() {
        let text = CONFIG.to_str().expect("ASCII");
        for setting in text.split(',') {
            let (key, value) = setting.split_once(':').expect("key:value");
            assert!(!key.is_empty() && !value.is_empty(), "{setting}");
        }
    }

    #[test]
    fn jemalloc_runs_with_these_settings() {
        // `opt.narenas` and `opt.dirty_decay_ms` are what jemalloc took at start: the compiled-in
        // string was read (the test runner sets no `_RJEM_MALLOC_CONF`).
        if crate::config::process_env_sets("_RJEM_MALLOC_CONF") {
            return;
        }
        assert_eq!(read_option::<u32>(c"opt.narenas"), 1);
        assert_eq!(read_option::<isize>(c"opt.dirty_decay_ms"), 1000);
        assert_eq!(read_option::<isize>(c"opt.muzzy_decay_ms"), 0);
    }

    fn read_option<T: Default + Copy>(name: &std::ffi::CStr) -> T {
        let mut value = T::default();
        let mut len = std::mem::size_of::<T>();
        #[allow(unsafe_code)]
        // SAFETY: `value` is a `T` of `len` bytes, the size jemalloc writes for this option; no
        // new value is passed.
        let rc = unsafe {
            tikv_jemalloc_sys::mallctl(
                name.as_ptr(),
                (&raw mut value).cast(),
                &raw mut len,
                std::ptr::null_mut(),
                0,
            )
        };
        assert_eq!(rc, 0, "mallctl({name:?})");
        value
    }
}
