//! The process's allocator, and what the rest of the program needs to know about it: jemalloc
//! (feature `jemalloc`, on by default) with settings for a gateway that must stay small, how
//! free heap goes back to the operating system ([`release_free_memory`], which the gateway calls
//! after its large builds through the hook it is handed), and glibc's arena cap for a build
//! without jemalloc ([`limit_glibc_arenas`]). No library crate names an allocator.
//!
//! A proxied `tools/call` made about 420 allocations (hyper, axum, rmcp's session and client,
//! serde). glibc's allocator spent about 106,000 instructions per call on them, a fifth of the
//! gateway's; jemalloc's thread caches spend about 38,000 (`benchmarks/proxy/instructions.sh`;
//! `benchmarks/proxy/README.md`, 2026-11-28).
//!
//! The settings ([`CONFIG`]), each measured for memory on 2 cores with the harness's backend:
//! - `narenas:1`: one automatic arena for every thread. The gateway runs few threads (its async
//!   workers, blocking threads for SQLite and files), and each arena keeps its own partly used
//!   pages: the default (four per core) left about 1 MB more resident at c = 32. The thread
//!   caches in front of the arena take almost every allocation.
//! - `dirty_decay_ms:1000,muzzy_decay_ms:0`: pages freed for a second go back to the
//!   operating system (the default keeps them ten seconds), so resident memory follows what is
//!   live, not the last peak. Without a background thread the decay advances only while the
//!   process allocates; a catalog build's peak is handed back at once anyway
//!   ([`release_free_memory`]).
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

/// Gives the heap's free memory back to the operating system now: every jemalloc arena's unused
/// dirty pages (with the `jemalloc` feature; its decay would return them within a second, but
/// only while the process allocates) and glibc's free pages (`malloc_trim`: all of the heap
/// without jemalloc, else what C libraries such as SQLite allocate). Either allocator keeps the
/// memory it got for a peak, so without this a gateway's resident memory follows its largest
/// catalog build rather than what is live. A trim walks every arena (a few milliseconds with a
/// large heap): call it off the async workers, as the gateway does.
pub fn release_free_memory() {
    let _ = purge_jemalloc();
    trim_glibc();
}

/// Every jemalloc arena's unused dirty pages returned now; whether jemalloc took the request.
#[cfg(all(feature = "jemalloc", not(target_env = "msvc")))]
fn purge_jemalloc() -> bool {
    // `MALLCTL_ARENAS_ALL`: the purge applies to every arena.
    const PURGE_ALL: &std::ffi::CStr = c"arena.4096.purge";
    // SAFETY: `arena.<i>.purge` reads and writes nothing (null pointers, zero length) and runs
    // under jemalloc's own locks.
    #[allow(unsafe_code)]
    let rc = unsafe {
        tikv_jemalloc_sys::mallctl(
            PURGE_ALL.as_ptr(),
            std::ptr::null_mut(),
            std::ptr::null_mut(),
            std::ptr::null_mut(),
            0,
        )
    };
    if rc != 0 {
        tracing::debug!(rc, "jemalloc refused to purge its arenas");
    }
    rc == 0
}

#[cfg(not(all(feature = "jemalloc", not(target_env = "msvc"))))]
fn purge_jemalloc() -> bool {
    false
}

#[cfg(all(target_os = "linux", target_env = "gnu"))]
fn trim_glibc() {
    // SAFETY: `malloc_trim` takes no pointers and works on the allocator's own state under
    // its own locks; 0 keeps no spare room at the top of the heap.
    #[allow(unsafe_code)]
    unsafe {
        libc::malloc_trim(0);
    }
}

#[cfg(not(all(target_os = "linux", target_env = "gnu")))]
fn trim_glibc() {}

/// Caps glibc's heap arenas at one per async worker thread plus one, for a gateway running
/// `worker_threads` workers on glibc's allocator (a build without jemalloc). Call it once each
/// worker has allocated (a thread takes its arena at its first allocation) and before anything
/// else has: a worker left without an arena of its own would share the main thread's. Returns
/// whether the allocator took the cap (false elsewhere than glibc).
///
/// glibc gives a thread that allocates while the others hold their arenas one of its own (up
/// to 8 per core), and an arena outlives its thread (the next new thread takes it over). So the
/// blocking pool's short-lived threads (SQLite, files, trims) keep an arena beside the main
/// thread's and the workers', and what a catalog build leaves live there keeps its pages. With
/// 10,000 tools, after `benchmarks/visibility/list_load.py --requests 10 --rounds 2 --cases
/// unfiltered`: uncapped, three arenas with 5.0 (main), 37.4 (the worker) and 4.9 MB resident;
/// capped, two with 3.6 and 37.9 MB, and RSS 62 -> 56 MiB (`benchmarks/proxy/README.md`,
/// 2026-11-27). `MALLOC_ARENA_MAX` gave the same at workers + 1, nothing at more, and worse
/// below (one arena for one worker: 91 MiB): a worker must not share its arena. Latency did not
/// move.
pub fn limit_glibc_arenas(worker_threads: usize) -> bool {
    set_arena_max(worker_threads.saturating_add(1))
}

#[cfg(all(target_os = "linux", target_env = "gnu"))]
fn set_arena_max(arenas: usize) -> bool {
    let arenas = libc::c_int::try_from(arenas).unwrap_or(libc::c_int::MAX);
    // SAFETY: `mallopt` takes no pointers and sets one allocator parameter under glibc's own
    // lock; `M_ARENA_MAX` only bounds the arenas made from now on.
    #[allow(unsafe_code)]
    unsafe {
        libc::mallopt(libc::M_ARENA_MAX, arenas) == 1
    }
}

#[cfg(not(all(target_os = "linux", target_env = "gnu")))]
fn set_arena_max(_arenas: usize) -> bool {
    false
}

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
    fn jemalloc_takes_the_purge_of_every_arena() {
        assert!(purge_jemalloc(), "mallctl refused arena.<all>.purge");
        // And the whole release runs (glibc's trim has no answer to check).
        release_free_memory();
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
