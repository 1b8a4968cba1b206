//! Where a query's ranking time goes with the local embedder: tokenizing, and the model's
//! forward pass for one query at a time (what `/chat` and `search_tools` pay per request) and in
//! batches of 32 (what `toolforge eval retrieval` pays). CPU time is the process's (all its
//! threads, from `/proc/self/stat`), so a second thread that spins shows up.
//!
//! ```sh
//! cargo bench -p toolforge-llm --bench ranker -- [--model DIR] [--queries N]
//! RAYON_NUM_THREADS=1 cargo bench -p toolforge-llm --bench ranker
//! ```
//!
//! Queries are MetaTool's (`evals/retrieval/metatool/queries.jsonl`); the model folder defaults
//! to `.tools/models/all-MiniLM-L6-v2` (`scripts/setup` installs it). Without the model the
//! bench says so and exits 0. `benchmarks/ranker/README.md` keeps the figures.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use toolforge_llm::embed::LocalEmbedder;

fn main() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let mut model = root.join(".tools/models/all-MiniLM-L6-v2");
    let mut count = 400usize;
    let mut args = std::env::args().skip(1);
    while let Some(arg) = args.next() {
        match arg.as_str() {
            "--model" => model = PathBuf::from(args.next().expect("--model DIR")),
            "--queries" => {
                count = args
                    .next()
                    .and_then(|n| n.parse().ok())
                    .expect("--queries N")
            }
            // What `cargo bench` passes to every harness.
            "--bench" => {}
            other => panic!("unknown argument {other:?} (expected --model DIR, --queries N)"),
        }
    }
    if !model.join("model.safetensors").exists() {
        println!(
            "ranker bench: no model at {} (scripts/setup installs it); nothing measured",
            model.display()
        );
        return;
    }
    let queries = metatool_queries(&root, count);
    let embedder = LocalEmbedder::from_dir(&model).expect("the model loads");
    // Warm-up: the first passes allocate the model's buffers and start its threads.
    for q in queries.iter().take(16) {
        embedder
            .embed_blocking(std::slice::from_ref(q))
            .expect("embeds");
    }

    println!(
        "ranker bench: {} MetaTool queries, model {}, {} CPU(s)",
        queries.len(),
        model.file_name().unwrap_or_default().to_string_lossy(),
        std::thread::available_parallelism().map_or(1, |n| n.get())
    );
    println!(
        "{:<28} {:>14} {:>14}",
        "what", "CPU ms/query", "wall ms/query"
    );
    let one = measure(|| {
        for q in &queries {
            embedder
                .embed_blocking(std::slice::from_ref(q))
                .expect("embeds");
        }
    });
    report("one query per pass", one, queries.len());
    let batched = measure(|| {
        embedder.embed_blocking(&queries).expect("embeds");
    });
    report("batches of 32", batched, queries.len());
}

/// CPU and wall time of `work`.
fn measure(work: impl FnOnce()) -> (Duration, Duration) {
    let cpu = process_cpu();
    let wall = Instant::now();
    work();
    (process_cpu() - cpu, wall.elapsed())
}

fn report(what: &str, (cpu, wall): (Duration, Duration), queries: usize) {
    let per = |d: Duration| d.as_secs_f64() * 1000.0 / queries as f64;
    println!("{what:<28} {:>14.2} {:>14.2}", per(cpu), per(wall));
}

/// The process's user and system CPU time so far (`/proc/self/stat`, clock ticks of 10 ms).
fn process_cpu() -> Duration {
    let stat = std::fs::read_to_string("/proc/self/stat").expect("/proc/self/stat (Linux)");
    // The command name may hold spaces; the fields after its closing parenthesis do not.
    let after = &stat[stat.rfind(')').expect("a stat line") + 2..];
    let fields: Vec<&str> = after.split(' ').collect();
    // utime and stime are fields 14 and 15 of the line, 12 and 13 after the name and state.
    let ticks: u64 =
        fields[11].parse::<u64>().expect("utime") + fields[12].parse::<u64>().expect("stime");
    Duration::from_millis(ticks * 10)
}

fn metatool_queries(root: &Path, count: usize) -> Vec<String> {
    let path = root.join("evals/retrieval/metatool/queries.jsonl");
    let text = std::fs::read_to_string(&path).expect("evals/retrieval/metatool/queries.jsonl");
    text.lines()
        .filter_map(|line| serde_json::from_str::<serde_json::Value>(line).ok())
        .filter_map(|v| v.get("query")?.as_str().map(str::to_owned))
        .take(count)
        .collect()
}
