//! Filesystem and TCP confinement of the `run_python` child with Landlock (Linux ≥ 5.13).
//!
//! Why raw syscalls: the ruleset is built in the parent (it allocates and opens directories),
//! and the child only calls `prctl(PR_SET_NO_NEW_PRIVS)` and `landlock_restrict_self` between
//! fork and exec, where nothing but async-signal-safe syscalls is allowed. The `landlock` crate
//! builds and applies in one step, which is the wrong shape for `pre_exec`.
//!
//! The rules: read and execute beneath the interpreter's own directories and the system library
//! directories; read, write and create beneath the run's empty working directory; nothing else.
//! With ABI ≥ 4, TCP `bind` and `connect` are denied outright (no rule allows any port). On a
//! kernel without Landlock the child runs without this layer (the others remain) and
//! [`abi_version`] says so.

use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::path::{Path, PathBuf};

const CREATE_RULESET_VERSION: u32 = 1;
const RULE_PATH_BENEATH: libc::c_int = 1;

const FS_EXECUTE: u64 = 1 << 0;
const FS_WRITE_FILE: u64 = 1 << 1;
const FS_READ_FILE: u64 = 1 << 2;
const FS_READ_DIR: u64 = 1 << 3;
/// Every filesystem right of ABI 1 (bits 0..=12).
const FS_ALL_V1: u64 = (1 << 13) - 1;
const FS_REFER: u64 = 1 << 13;
const FS_TRUNCATE: u64 = 1 << 14;
const FS_IOCTL_DEV: u64 = 1 << 15;
const NET_BIND_TCP: u64 = 1 << 0;
const NET_CONNECT_TCP: u64 = 1 << 1;

#[repr(C)]
struct RulesetAttr {
    handled_access_fs: u64,
    handled_access_net: u64,
}

#[repr(C, packed)]
struct PathBeneathAttr {
    allowed_access: u64,
    parent_fd: i32,
}

/// The Landlock ABI version the kernel offers, or `None` without Landlock.
#[must_use]
#[allow(unsafe_code)]
pub fn abi_version() -> Option<u32> {
    // SAFETY: with the VERSION flag the kernel reads no attribute memory (NULL, size 0).
    let v = unsafe {
        libc::syscall(
            libc::SYS_landlock_create_ruleset,
            std::ptr::null::<RulesetAttr>(),
            0usize,
            CREATE_RULESET_VERSION,
        )
    };
    u32::try_from(v).ok().filter(|v| *v >= 1)
}

/// System directories an interpreter loads shared libraries and locale data from.
const SYSTEM_READ_DIRS: &[&str] = &[
    "/lib",
    "/lib64",
    "/usr/lib",
    "/usr/lib64",
    "/usr/local/lib",
    "/usr/share/zoneinfo",
    "/etc/ld.so.cache",
    "/dev/null",
    "/dev/urandom",
];

/// The directories an interpreter needs to read: its prefixes (the standard library), the
/// directory of its executable, and the system library directories. Asks the interpreter once.
#[must_use]
pub fn interpreter_read_paths(python: &Path) -> Vec<PathBuf> {
    let mut paths: Vec<PathBuf> = std::process::Command::new(python)
        .args([
            "-I",
            "-S",
            "-c",
            "import sys, os; print(sys.base_prefix); print(sys.prefix); \
             print(sys.base_exec_prefix); print(os.path.dirname(os.path.realpath(sys.executable)))",
        ])
        .stdin(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .output()
        .ok()
        .filter(|o| o.status.success())
        .map(|o| {
            String::from_utf8_lossy(&o.stdout)
                .lines()
                .map(PathBuf::from)
                .collect()
        })
        .unwrap_or_default();
    paths.extend(SYSTEM_READ_DIRS.iter().map(PathBuf::from));
    paths.retain(|p| p.is_absolute() && p.exists());
    paths.sort();
    paths.dedup();
    paths
}

/// A ruleset built in the parent, applied in the child by [`Ruleset::restrict_self`].
#[derive(Debug)]
pub struct Ruleset {
    fd: OwnedFd,
}

impl Ruleset {
    /// Builds the ruleset: read/execute beneath `read_only`, everything beneath `read_write`,
    /// and (ABI ≥ 4) no TCP at all. `None` when the kernel has no Landlock.
    ///
    /// # Errors
    /// A path that cannot be opened or a rule the kernel refuses.
    #[allow(unsafe_code)]
    pub fn new(read_only: &[PathBuf], read_write: &Path) -> std::io::Result<Option<Self>> {
        let Some(abi) = abi_version() else {
            return Ok(None);
        };
        let mut fs = FS_ALL_V1;
        if abi >= 2 {
            fs |= FS_REFER;
        }
        if abi >= 3 {
            fs |= FS_TRUNCATE;
        }
        if abi >= 5 {
            fs |= FS_IOCTL_DEV;
        }
        let attr = RulesetAttr {
            handled_access_fs: fs,
            handled_access_net: if abi >= 4 {
                NET_BIND_TCP | NET_CONNECT_TCP
            } else {
                0
            },
        };
        let size = if abi >= 4 {
            std::mem::size_of::<RulesetAttr>()
        } else {
            std::mem::size_of::<u64>()
        };
        // SAFETY: `attr` is a live, correctly laid out struct of at least `size` bytes.
        let raw = unsafe {
            libc::syscall(
                libc::SYS_landlock_create_ruleset,
                &raw const attr,
                size,
                0u32,
            )
        };
        let raw = i32::try_from(raw).unwrap_or(-1);
        if raw < 0 {
            return Err(std::io::Error::last_os_error());
        }
        // SAFETY: the kernel just returned this descriptor to us; we own it.
        let ruleset = Self {
            fd: unsafe { OwnedFd::from_raw_fd(raw) },
        };
        let read = FS_EXECUTE | FS_READ_FILE | FS_READ_DIR;
        for path in read_only {
            ruleset.allow(path, read, fs)?;
        }
        ruleset.allow(read_write, fs, fs)?;
        Ok(Some(ruleset))
    }

    #[allow(unsafe_code)]
    fn allow(&self, path: &Path, access: u64, handled: u64) -> std::io::Result<()> {
        let file = std::fs::File::open(path)?;
        // Directory-only rights on a file are refused by the kernel: keep file rights only.
        let access = if file.metadata()?.is_dir() {
            access & handled
        } else {
            access
                & handled
                & (FS_EXECUTE | FS_READ_FILE | FS_WRITE_FILE | FS_TRUNCATE | FS_IOCTL_DEV)
        };
        let attr = PathBeneathAttr {
            allowed_access: access,
            parent_fd: file.as_raw_fd(),
        };
        // SAFETY: `attr` is a live packed struct as the kernel defines it; both fds are open.
        let rc = unsafe {
            libc::syscall(
                libc::SYS_landlock_add_rule,
                self.fd.as_raw_fd(),
                RULE_PATH_BENEATH,
                &raw const attr,
                0u32,
            )
        };
        if rc < 0 {
            return Err(std::io::Error::last_os_error());
        }
        Ok(())
    }

    /// The raw descriptor, for [`restrict_self`] in the child.
    #[must_use]
    pub fn raw_fd(&self) -> i32 {
        self.fd.as_raw_fd()
    }
}

/// Confines the calling process to `ruleset_fd`. Async-signal-safe: two syscalls, no memory.
/// Returns false when the kernel refused.
#[allow(unsafe_code)]
pub fn restrict_self(ruleset_fd: i32) -> bool {
    // SAFETY: plain syscalls on integers.
    unsafe {
        libc::prctl(libc::PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) == 0
            && libc::syscall(libc::SYS_landlock_restrict_self, ruleset_fd, 0u32) == 0
    }
}
