//! Times `monty` on a trivial snippet and runs the toolkit's allowlisted imports and a few
//! escape attempts through it. `cargo run --release` here; results in docs/toolkit.md.

use std::time::{Duration, Instant};
use monty::MontyRun;
use monty_types::{CompileOptions, PrintWriter, ResourceLimits, ResourceTracker};

fn run(code: &str, ms: u64) -> (Result<String, String>, Duration) {
    let t = Instant::now();
    let limits = ResourceLimits { max_duration: Some(Duration::from_millis(ms)), ..ResourceLimits::default() };
    let out = match MontyRun::new(code.to_owned(), "main.py", vec![], CompileOptions::default()) {
        Err(e) => Err(format!("compile: {e}")),
        Ok(r) => {
            let mut s = String::new();
            match r.run(vec![], ResourceTracker::new(limits), PrintWriter::CollectString(&mut s, Some(65536))) {
                Ok(v) => Ok(format!("{s}{v:?}")),
                Err(e) => Err(format!("{e}")),
            }
        }
    };
    (out, t.elapsed())
}

fn main() {
    let n = 2000;
    let mut lat: Vec<Duration> = (0..n).map(|_| run("x = sum(range(10))\nprint(x)", 1000).1).collect();
    lat.sort();
    println!("trivial snippet, in-process, n={n}: p50 {:?} p99 {:?}", lat[n / 2], lat[n * 99 / 100]);
    let cases: &[(&str, &str)] = &[
        ("import math", "import math\nprint(math.sqrt(16))"),
        ("import statistics", "import statistics\nprint(statistics.mean([1,2,3]))"),
        ("import json", "import json\nprint(json.dumps({'a': 1}))"),
        ("import itertools", "import itertools\nprint(list(itertools.permutations([1,2])))"),
        ("import collections", "import collections\nprint(collections.Counter('aab'))"),
        ("import datetime", "import datetime\nprint(datetime.date(2026,1,1))"),
        ("import re", "import re\nprint(re.findall('a+', 'caaab'))"),
        ("import random", "import random\nrandom.seed(1)\nprint(random.randint(1,9))"),
        ("import textwrap", "import textwrap\nprint(textwrap.wrap('a b c', 3))"),
        ("class + f-string", "class A:\n  def __init__(self, v): self.v = v\nprint(f'{A(3).v}')"),
        ("open /etc/passwd", "print(open('/etc/passwd').read())"),
        ("import os", "import os\nprint(os.listdir('/'))"),
        ("import subprocess", "import subprocess\nprint(subprocess.run(['id']))"),
        ("import socket", "import socket\nsocket.create_connection(('127.0.0.1', 22))"),
        ("__import__", "__import__('os').system('id')"),
        ("dunder walk", "print(().__class__.__base__.__subclasses__())"),
        ("getattr trick", "print(getattr(getattr((), '__cl'+'ass__'), '__base__'))"),
        ("eval/exec", "exec('import os')"),
        ("infinite loop (limit 500 ms)", "while True:\n  pass"),
        ("recursion bomb", "def f(n): return f(n+1)\nf(0)"),
        ("huge output", "print('x' * 10_000_000)"),
    ];
    for (name, code) in cases {
        let (r, d) = run(code, 500);
        let txt = match r { Ok(s) => format!("OK  {}", s.chars().take(70).collect::<String>()), Err(e) => format!("ERR {}", e.lines().last().unwrap_or("").chars().take(90).collect::<String>()) };
        println!("{name:32} {d:>10.1?}  {}", txt.replace('\n', "\\n"));
    }
}
