//! At least 40 escape attempts executed for real: each is rejected or contained, the canary
//! files are untouched, the secret never leaks, and the sandbox still answers afterwards.

use std::sync::Arc;

use toolforge_toolkit::sandbox::{self, PythonRun};

/// `CANARY` is replaced with the canary file's path, `DIR` with its directory.
const CORPUS: &[&str] = &[
    "open('CANARY').read()",
    "print(open('CANARY').read())",
    "import os\nprint(os.listdir('DIR'))",
    "import os\nos.remove('CANARY')",
    "import subprocess\nsubprocess.run(['rm', 'CANARY'])",
    "import socket\nsocket.create_connection(('127.0.0.1', 22))",
    "import urllib.request\nurllib.request.urlopen('http://127.0.0.1:1')",
    "import shutil\nshutil.rmtree('DIR')",
    "import sys\nprint(sys.modules)",
    "import ctypes",
    "import pathlib\npathlib.Path('CANARY').write_text('x')",
    "from os import system\nsystem('touch DIR/pwned')",
    "from os import path",
    "import collections.abc",
    "from . import x",
    "__import__('os').system('touch DIR/pwned')",
    "eval(\"__import__('os')\")",
    "exec('import os')",
    "compile('1', 'x', 'eval')",
    "getattr(print, '__self__')",
    "setattr(print, 'x', 1)",
    "globals()['__builtins__']",
    "vars()",
    "locals()",
    "().__class__.__bases__[0].__subclasses__()",
    "[c for c in ''.__class__.__mro__[1].__subclasses__()]",
    "x = (1).__class__",
    "print.__self__",
    "f = lambda: 0\nf.__globals__",
    "import json\njson.__loader__",
    "s = '_' + '_import_' + '_'\nprint(s)\nimport math\nprint(math.__dict__)",
    "import math\nprint(type(math))",
    "import codecs\ncodecs.decode('bf', 'rot13')",
    "import base64\nexec(base64.b64decode('aW1wb3J0IG9z'))",
    "from math import *",
    "from math import _x",
    "breakpoint()",
    "input()",
    "while True:\n    pass",
    "x = 'a'\nwhile True:\n    x = x + x",
    "x = [0] * (10 ** 10)",
    "print('A' * (10 ** 7))",
    "import itertools\nfor i in itertools.count():\n    print(i)",
    "def f():\n    return f()\nf()",
    "import re\nre.match('(a+)+$', 'a' * 40 + 'b')",
    "global x",
    "class A:\n    pass\nA.__subclasses__()",
    "raise SystemExit(0)\nimport os",
    "def f(): pass\nprint(f.__code__)",
    "print(str(1).join)\nimport os",
];

fn fill(code: &str, canary: &std::path::Path) -> String {
    code.replace("CANARY", &canary.display().to_string())
        .replace("DIR", &canary.parent().unwrap().display().to_string())
}

#[tokio::test]
async fn escape_attempts_are_refused_or_contained() {
    assert!(CORPUS.len() >= 40);
    let cfg = Arc::new(crate::sandbox_config());
    let host = tempfile::tempdir().unwrap();
    let canary = host.path().join("canary.txt");
    let secret = "canary-secret-7f3a91";
    std::fs::write(&canary, secret).unwrap();
    let mut set = tokio::task::JoinSet::new();
    let sem = Arc::new(tokio::sync::Semaphore::new(4));
    for code in CORPUS {
        let code = fill(code, &canary);
        let cfg = Arc::clone(&cfg);
        let sem = Arc::clone(&sem);
        set.spawn(async move {
            let _p = sem.acquire().await.unwrap();
            let run = sandbox::run(&cfg, &code, Some(2))
                .await
                .expect("sandbox ran");
            (code, run)
        });
    }
    while let Some(res) = set.join_next().await {
        let (code, run): (String, PythonRun) = res.unwrap();
        let summary = format!(
            "{code:?}: exit {:?} timed_out {} rejected {} stderr {:.300}",
            run.exit_code, run.timed_out, run.rejected, run.stderr
        );
        // Refused, failed, stopped, or (huge output) cut at the cap.
        assert!(!run.ok || run.stdout_truncated, "escaped: {summary}");
        assert!(
            !run.stdout.contains(secret) && !run.stderr.contains(secret),
            "{code:?} leaked"
        );
        assert!(run.stdout.len() <= 64 * 1024 && run.stderr.len() <= 64 * 1024);
        assert!(run.duration_ms < 5_000, "not stopped: {summary}");
    }
    assert_eq!(std::fs::read_to_string(&canary).unwrap(), secret);
    let names: Vec<_> = std::fs::read_dir(host.path())
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .collect();
    assert_eq!(names, ["canary.txt"]);
    let ok = sandbox::run(&cfg, "print(sum(range(10)))", None)
        .await
        .unwrap();
    assert!(ok.ok, "{ok:?}");
    assert_eq!(ok.stdout, "45\n");
}

#[tokio::test]
async fn allowed_snippets_run_and_bad_arguments_are_clear() {
    let cfg = crate::sandbox_config();
    let r = sandbox::run(
        &cfg,
        "import statistics, json\nprint(json.dumps(statistics.mean([59.5, 178.5, 96.0])))",
        None,
    )
    .await
    .unwrap();
    assert!(r.ok, "{r:?}");
    assert_eq!(r.stdout, "111.33333333333333\n");
    let r = sandbox::run(&cfg, "print(1/0)", None).await.unwrap();
    assert!(
        !r.ok && !r.rejected && r.stderr.contains("ZeroDivisionError"),
        "{r:?}"
    );
    for (t, ok) in [
        (Some(0), false),
        (Some(11), false),
        (Some(-1), false),
        (Some(10), true),
    ] {
        assert_eq!(sandbox::run(&cfg, "print(1)", t).await.is_ok(), ok, "{t:?}");
    }
    assert!(sandbox::run(&cfg, "  ", None).await.is_err());
}
