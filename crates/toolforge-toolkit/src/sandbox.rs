//! `run_python`: a sandboxed CPython child.
//!
//! Layers, outermost first: a separate process in its own session (the whole group is killed on
//! timeout), `setrlimit` on CPU seconds, address space, file size, open files and process count,
//! a best-effort new user+network namespace (no network when the kernel permits it), an empty
//! temporary working directory, a cleared environment, `python3 -I -S -B` (no site, no user
//! paths, no env vars), and an embedded AST guard (`sandbox_guard.py`) that rejects non-allowlisted
//! imports, denylisted names and any dunder access before the snippet runs, then runs it with
//! restricted builtins. Beneath all of it, Landlock (when the kernel has it) confines the child
//! to reading the interpreter's own files and writing its working directory, and denies TCP.
//! Output is capped. It does NOT promise protection against CPython or kernel exploits (see
//! docs).

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::{Duration, Instant};

use serde::Serialize;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

const GUARD: &str = include_str!("sandbox_guard.py");

/// Default wall-clock timeout.
pub const DEFAULT_TIMEOUT_SECS: u64 = 5;
/// Largest wall-clock timeout a caller can ask for.
pub const MAX_TIMEOUT_SECS: u64 = 10;

/// Limits of the child.
#[derive(Debug, Clone)]
pub struct SandboxConfig {
    /// The real interpreter executable (not a shell shim: the environment is cleared).
    pub python: PathBuf,
    /// Address-space limit in bytes.
    pub max_memory_bytes: u64,
    /// Bytes kept of each of stdout and stderr.
    pub max_output_bytes: usize,
    /// Bytes of code accepted.
    pub max_code_bytes: usize,
    /// What the child may read beneath Landlock (the interpreter's prefixes, system libraries).
    pub read_only_paths: Vec<PathBuf>,
    /// What all runs together may take (each reserves `max_memory_bytes`).
    pub budget: crate::budget::PythonBudget,
}

impl SandboxConfig {
    /// Defaults around the interpreter `python` (asks it once for its prefixes).
    #[must_use]
    pub fn new(python: PathBuf) -> Self {
        Self {
            read_only_paths: crate::landlock::interpreter_read_paths(&python),
            python,
            max_memory_bytes: 512 * 1024 * 1024,
            max_output_bytes: 64 * 1024,
            max_code_bytes: 64 * 1024,
            budget: crate::budget::PythonBudget::default(),
        }
    }
}

/// The outcome of one run (`isError` is set by the server when `ok` is false).
#[derive(Debug, Clone, Serialize, schemars::JsonSchema)]
pub struct PythonRun {
    pub ok: bool,
    pub stdout: String,
    pub stderr: String,
    pub exit_code: Option<i32>,
    pub timed_out: bool,
    pub rejected: bool,
    pub stdout_truncated: bool,
    pub stderr_truncated: bool,
    pub timeout_seconds: u64,
    pub duration_ms: u64,
}

/// Why a snippet could not be run at all.
#[derive(Debug, thiserror::Error)]
pub enum SandboxError {
    #[error("code is empty")]
    Empty,
    #[error("code is {0} bytes; the limit is {1}")]
    TooLong(usize, usize),
    #[error("timeout_seconds must be between 1 and {MAX_TIMEOUT_SECS}, got {0}")]
    BadTimeout(i64),
    #[error("could not start the interpreter {0}: {1}")]
    Spawn(PathBuf, std::io::Error),
}

/// Resolve the real executable behind `python3` (pyenv and similar shims need an environment
/// the sandbox clears). Call once at start-up.
#[must_use]
pub fn resolve_python(name: &str) -> PathBuf {
    std::process::Command::new(name)
        .args(["-I", "-S", "-c", "import sys; print(sys.executable)"])
        .stdin(Stdio::null())
        .stderr(Stdio::null())
        .output()
        .ok()
        .filter(|o| o.status.success())
        .and_then(|o| String::from_utf8(o.stdout).ok())
        .map(|s| PathBuf::from(s.trim()))
        .filter(|p| p.is_file())
        .unwrap_or_else(|| PathBuf::from(name))
}

#[allow(unsafe_code)]
fn harden(cmd: &mut tokio::process::Command, cpu_secs: u64, mem: u64, landlock_fd: Option<i32>) {
    // SAFETY: the closure runs in the forked child before exec and only calls async-signal-safe
    // libc functions (setsid, setrlimit, unshare, prctl, landlock) on values computed before
    // the fork.
    unsafe {
        cmd.pre_exec(move || {
            libc::setsid();
            let set = |res, v: u64| {
                let lim = libc::rlimit {
                    rlim_cur: v as libc::rlim_t,
                    rlim_max: v as libc::rlim_t,
                };
                libc::setrlimit(res, &raw const lim)
            };
            // A fresh user+net namespace: no interfaces but a down loopback. Best effort.
            let _ = libc::unshare(libc::CLONE_NEWUSER | libc::CLONE_NEWNET);
            // Fail closed: a ruleset was built, so the kernel has Landlock; if confining
            // fails anyway, the snippet does not run.
            if let Some(fd) = landlock_fd
                && !crate::landlock::restrict_self(fd)
            {
                return Err(std::io::Error::from_raw_os_error(libc::EPERM));
            }
            set(libc::RLIMIT_CPU, cpu_secs);
            set(libc::RLIMIT_AS, mem);
            set(libc::RLIMIT_FSIZE, 1024 * 1024);
            set(libc::RLIMIT_NOFILE, 32);
            set(libc::RLIMIT_NPROC, 0);
            set(libc::RLIMIT_CORE, 0);
            Ok(())
        });
    }
}

async fn read_capped<R: tokio::io::AsyncRead + Unpin>(mut r: R, cap: usize) -> (Vec<u8>, bool) {
    let mut out = Vec::new();
    let mut buf = [0u8; 8192];
    let mut truncated = false;
    loop {
        match r.read(&mut buf).await {
            Ok(0) | Err(_) => break,
            Ok(n) => {
                let room = cap.saturating_sub(out.len());
                if n > room {
                    truncated = true;
                }
                out.extend_from_slice(&buf[..n.min(room)]);
            }
        }
    }
    (out, truncated)
}

/// Check and run `code` in a fresh isolated child.
///
/// # Errors
/// Invalid arguments, or the interpreter cannot start.
pub async fn run(
    cfg: &SandboxConfig,
    code: &str,
    timeout_seconds: Option<i64>,
) -> Result<PythonRun, SandboxError> {
    run_with(cfg, code, timeout_seconds, GUARD).await
}

/// Runs the child with `program` as its `-c` program (the guard, or a bare `exec` in tests of
/// the OS layers beneath it).
async fn run_with(
    cfg: &SandboxConfig,
    code: &str,
    timeout_seconds: Option<i64>,
    program: &str,
) -> Result<PythonRun, SandboxError> {
    if code.trim().is_empty() {
        return Err(SandboxError::Empty);
    }
    if code.len() > cfg.max_code_bytes {
        return Err(SandboxError::TooLong(code.len(), cfg.max_code_bytes));
    }
    let timeout = match timeout_seconds {
        None => DEFAULT_TIMEOUT_SECS,
        Some(t) if (1..=i64::try_from(MAX_TIMEOUT_SECS).unwrap_or(10)).contains(&t) => {
            t.unsigned_abs()
        }
        Some(t) => return Err(SandboxError::BadTimeout(t)),
    };
    let workdir = tempfile::tempdir().map_err(|e| SandboxError::Spawn(cfg.python.clone(), e))?;
    let mut cmd = tokio::process::Command::new(&cfg.python);
    cmd.args(["-I", "-S", "-B", "-c", program])
        .env_clear()
        .env("PYTHONIOENCODING", "utf-8")
        .current_dir(workdir.path())
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true);
    let ruleset = crate::landlock::Ruleset::new(&cfg.read_only_paths, workdir.path())
        .map_err(|e| SandboxError::Spawn(cfg.python.clone(), e))?;
    harden(
        &mut cmd,
        timeout + 1,
        cfg.max_memory_bytes,
        ruleset.as_ref().map(crate::landlock::Ruleset::raw_fd),
    );
    let start = Instant::now();
    let mut child = cmd
        .spawn()
        .map_err(|e| SandboxError::Spawn(cfg.python.clone(), e))?;
    drop(ruleset);
    let pid = child.id();
    if let Some(mut stdin) = child.stdin.take() {
        let _ = stdin.write_all(code.as_bytes()).await;
        drop(stdin);
    }
    let out = tokio::spawn(read_capped(
        child.stdout.take().expect("piped stdout"),
        cfg.max_output_bytes,
    ));
    let err = tokio::spawn(read_capped(
        child.stderr.take().expect("piped stderr"),
        cfg.max_output_bytes,
    ));
    let status = tokio::time::timeout(Duration::from_secs(timeout), child.wait()).await;
    let timed_out = status.is_err();
    kill_group(pid);
    let status = match status {
        Ok(s) => s.ok(),
        Err(_) => child.wait().await.ok(),
    };
    let (stdout, stdout_truncated) = out.await.unwrap_or_default();
    let (stderr, stderr_truncated) = err.await.unwrap_or_default();
    let exit_code = status.and_then(|s| s.code());
    let rejected = exit_code == Some(3) && stderr.starts_with(b"rejected: ");
    Ok(PythonRun {
        ok: !timed_out && exit_code == Some(0),
        stdout: String::from_utf8_lossy(&stdout).into_owned(),
        stderr: String::from_utf8_lossy(&stderr).into_owned(),
        exit_code,
        timed_out,
        rejected,
        stdout_truncated,
        stderr_truncated,
        timeout_seconds: timeout,
        duration_ms: u64::try_from(start.elapsed().as_millis()).unwrap_or(u64::MAX),
    })
}

#[allow(unsafe_code)]
fn kill_group(pid: Option<u32>) {
    if let Some(pid) = pid.and_then(|p| i32::try_from(p).ok()) {
        // SAFETY: kill(2) on the child's own process group (it called setsid, so its pgid is
        // its pid); no memory is shared.
        unsafe {
            libc::kill(-pid, libc::SIGKILL);
        }
    }
}

/// Whether `path` looks like a usable interpreter.
#[must_use]
pub fn python_available(path: &Path) -> bool {
    path.is_file()
}

#[cfg(test)]
mod tests {
    //! The OS layers on their own: the static guard is replaced by a bare `exec`, so these
    //! snippets reach the interpreter unchecked, as an exploit of the guard would.
    use super::*;

    const BARE: &str = "import sys; exec(sys.stdin.read())";

    fn cfg() -> SandboxConfig {
        SandboxConfig::new(resolve_python("python3"))
    }

    async fn bare(code: &str) -> PythonRun {
        run_with(&cfg(), code, Some(5), BARE)
            .await
            .expect("sandbox starts")
    }

    #[tokio::test]
    async fn bare_exec_still_runs_ordinary_code() {
        let r = bare("import json, math\nprint(json.dumps(math.sqrt(16)))").await;
        assert!(r.ok, "{r:?}");
        assert_eq!(r.stdout.trim(), "4.0");
    }

    #[tokio::test]
    async fn host_files_outside_the_interpreter_are_unreadable() {
        if crate::landlock::abi_version().is_none() {
            panic!("this kernel has no Landlock: the filesystem layer cannot be tested here");
        }
        let dir = tempfile::tempdir().expect("tempdir");
        let secret = dir.path().join("secret.txt");
        std::fs::write(&secret, "canary-7d1f").expect("write canary");
        let code = format!(
            "import os\nfor p in [{:?}, '/etc/passwd', '/etc/hostname']:\n    try:\n        \
             print(p, open(p).read()[:20])\n    except OSError as e:\n        print(p, 'DENIED', \
             e.errno)\nprint('LIST', len(os.listdir('/')) if os.access('/', os.R_OK) else 'x')",
            secret.display().to_string()
        );
        let r = bare(&code).await;
        assert!(!r.stdout.contains("canary-7d1f"), "{r:?}");
        assert!(!r.stdout.contains("root:"), "{r:?}");
        assert_eq!(r.stdout.matches("DENIED").count(), 3, "{r:?}");
        // The working directory stays writable.
        let w = bare("open('out.txt', 'w').write('ok')\nprint(open('out.txt').read())").await;
        assert_eq!(w.stdout.trim(), "ok", "{w:?}");
    }

    #[tokio::test]
    async fn no_network_even_to_loopback() {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
        let port = listener.local_addr().expect("addr").port();
        let code = format!(
            "import socket\ntry:\n    socket.create_connection(('127.0.0.1', {port}), \
             timeout=2)\n    print('CONNECTED')\nexcept OSError as e:\n    print('BLOCKED', e)"
        );
        let r = bare(&code).await;
        assert!(r.stdout.contains("BLOCKED"), "{r:?}");
        listener.set_nonblocking(true).expect("nonblocking");
        assert!(
            listener.accept().is_err(),
            "the child reached the host's loopback"
        );
    }
}
