#!/usr/bin/env python3
"""Load test of `toolforge serve`'s /chat with the offline mock model (Python 3 stdlib only).

Starts `toolforge serve` on loopback with LLM_PROVIDER=mock, the built-in toolkit as its one
MCP server and TRACE_SINK in a temporary directory, waits for /health, then drives three
phases at the same concurrency over HTTP/1.1 keep-alive connections, interleaved in rounds
(--rounds) so that outside load falls on all three alike:

  1. GET /health            the cheapest route of the same server: the baseline
  2. POST /chat             the mock agent's Alice Nguyen task: sql_query on the toolkit, then
                            the answer (two mock model calls, one real tool call, one trace line)
  3. POST /chat dry_run     the same plan, nothing executed (one trace line)

and reports requests/s, p50/p99 latency, errors, the server's CPU per request (the server and
its toolkit child), /chat
throughput as a ratio to /health, the server's RSS after the run, and the trace lines written
against the requests executed. Every response is checked; any error or mismatch exits 1.
The server (and its toolkit child) is stopped at the end, also on error.

    python3 benchmarks/agent/chat_load.py [--duration 10] [--concurrency 8] [--rounds 5] [--json out.json]

The binary is $TOOLFORGE_BIN, else target/release/toolforge when built, else
target/debug/toolforge.
"""

import argparse
import asyncio
import json
import os
import re
import signal
import subprocess
import sys
import tempfile
import time
import urllib.request

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
MESSAGE = (
    "Look up customer Alice Nguyen's orders, sum their total, and tell me if it exceeds $500."
)
EXPECTED = "Alice Nguyen's completed orders total $334.00, which does not exceed $500.00."
REQUEST_TIMEOUT = 30.0


def default_binary():
    env = os.environ.get("TOOLFORGE_BIN")
    if env:
        return env
    release = os.path.join(ROOT, "target", "release", "toolforge")
    if os.path.exists(release):
        return release
    return os.path.join(ROOT, "target", "debug", "toolforge")


def build_kind(binary):
    parts = os.path.normpath(os.path.abspath(binary)).split(os.sep)
    if "release" in parts:
        return "release"
    if "debug" in parts:
        return "debug"
    return "unknown"


# ---- the server ----


class Server:
    """`toolforge serve` on loopback. `servers` is its `mcpServers` map (default: the built-in
    toolkit over stdio)."""

    def __init__(self, binary, workdir, servers=None):
        self.binary = os.path.abspath(binary)
        self.workdir = workdir
        self.servers = servers or {
            "toolkit": {
                "command": self.binary,
                "args": ["server", "toolkit", "--stdio"],
                "timeout": 30,
            }
        }
        self.traces = os.path.join(workdir, "traces.jsonl")
        self.log_path = os.path.join(workdir, "server.log")
        self.proc = None
        self.host = "127.0.0.1"
        self.port = None

    def start(self, timeout=60.0):
        config = os.path.join(self.workdir, "mcp.servers.json")
        with open(config, "w") as f:
            json.dump({"mcpServers": self.servers}, f)
        env = dict(os.environ)
        env.update(
            {
                "LLM_PROVIDER": "mock",
                "TRACE_SINK": self.traces,
                "RUST_LOG": env.get("RUST_LOG", "warn"),
                "NO_COLOR": "1",
            }
        )
        for var in ("REDIS_URL", "OTEL_METRICS_EXPORTER", "COST_CEILING_USD", "AGENT_MAX_TOOLS"):
            env.pop(var, None)
        self.log = open(self.log_path, "wb")
        # Its own process group, so the toolkit child goes with it at the end.
        self.proc = subprocess.Popen(
            [self.binary, "serve", "--config", config, "--host", self.host, "--port", "0"],
            cwd=self.workdir,
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=self.log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        deadline = time.monotonic() + timeout
        while self.port is None:
            if self.proc.poll() is not None:
                raise RuntimeError(f"toolforge serve exited ({self.proc.returncode}):\n{self.tail()}")
            if time.monotonic() > deadline:
                raise RuntimeError(f"toolforge serve did not start in {timeout}s:\n{self.tail()}")
            with open(self.log_path, "rb") as f:
                m = re.search(rb"serving http://127\.0\.0\.1:(\d+)", f.read())
            if m:
                self.port = int(m.group(1))
            else:
                time.sleep(0.05)
        while True:
            try:
                with urllib.request.urlopen(f"http://{self.host}:{self.port}/health", timeout=5) as r:
                    health = json.load(r)
                if health.get("status") == "ok" and all(
                    s.get("state") == "ready" for s in health.get("servers", [])
                ):
                    return health
            except OSError:
                pass
            if self.proc.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"/health never became ok:\n{self.tail()}")
            time.sleep(0.1)

    def tail(self, n=30):
        try:
            with open(self.log_path, "rb") as f:
                lines = f.read().decode(errors="replace").splitlines()
            return "\n".join(lines[-n:])
        except OSError:
            return ""

    def proc_status(self, key):
        """A /proc/PID/status field in kB (RssAnon, VmHWM), or None."""
        try:
            with open(f"/proc/{self.proc.pid}/status") as f:
                for line in f:
                    if line.startswith(key + ":"):
                        return int(line.split()[1])
        except OSError:
            pass
        return None

    def cpu_seconds(self):
        """User + system CPU of the server's process group: the server and its toolkit child."""
        total, seen = 0, False
        for pid in os.listdir("/proc"):
            if not pid.isdigit():
                continue
            try:
                with open(f"/proc/{pid}/stat") as f:
                    fields = f.read().rsplit(")", 1)[1].split()
            except OSError:
                continue
            try:
                if int(fields[2]) == self.proc.pid:  # pgrp
                    total += int(fields[11]) + int(fields[12])  # utime + stime
                    seen = True
            except (IndexError, ValueError):
                continue
        return total / os.sysconf("SC_CLK_TCK") if seen else None

    def stop(self):
        """SIGTERM (the server flushes its traces and stops the toolkit), then SIGKILL."""
        if self.proc is None:
            return
        if self.proc.poll() is None:
            try:
                os.killpg(self.proc.pid, signal.SIGTERM)
            except ProcessLookupError:
                pass
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                pass
        try:
            # Whatever is left of the group (a toolkit child that outlived the server).
            os.killpg(self.proc.pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass
        if self.proc.poll() is None:
            self.proc.wait(timeout=5)
        self.log.close()


# ---- the load generator ----


class Connection:
    """One HTTP/1.1 keep-alive connection over asyncio streams."""

    def __init__(self, host, port):
        self.host, self.port = host, port
        self.reader = self.writer = None

    async def request(self, raw):
        if self.writer is None:
            self.reader, self.writer = await asyncio.open_connection(self.host, self.port)
        self.writer.write(raw)
        await self.writer.drain()
        head = await self.reader.readuntil(b"\r\n\r\n")
        lines = head.decode("latin-1").split("\r\n")
        status = int(lines[0].split(" ", 2)[1])
        headers = {}
        for line in lines[1:]:
            if ":" in line:
                k, v = line.split(":", 1)
                headers[k.strip().lower()] = v.strip()
        if headers.get("transfer-encoding", "").lower() == "chunked":
            body = b""
            while True:
                size = int((await self.reader.readuntil(b"\r\n")).split(b";")[0], 16)
                chunk = await self.reader.readexactly(size + 2)
                if size == 0:
                    break
                body += chunk[:-2]
        else:
            body = await self.reader.readexactly(int(headers.get("content-length", "0")))
        if headers.get("connection", "").lower() == "close":
            await self.close()
        return status, body

    async def close(self):
        if self.writer is not None:
            self.writer.close()
            try:
                await self.writer.wait_closed()
            except OSError:
                pass
        self.reader = self.writer = None


def http_request(method, path, host, port, body=None):
    head = f"{method} {path} HTTP/1.1\r\nHost: {host}:{port}\r\nConnection: keep-alive\r\n"
    data = b""
    if body is not None:
        data = json.dumps(body).encode()
        head += f"Content-Type: application/json\r\nContent-Length: {len(data)}\r\n"
    return head.encode() + b"\r\n" + data


def check_health(status, body):
    if status != 200:
        return f"status {status}"
    if json.loads(body).get("status") != "ok":
        return f"health not ok: {body[:200]!r}"
    return None


def check_chat(status, body):
    if status != 200:
        return f"status {status}: {body[:200]!r}"
    r = json.loads(body)
    if r.get("halted") or r.get("response") != EXPECTED:
        return f"unexpected answer: halted={r.get('halted')} response={r.get('response')!r}"
    if not r.get("steps") or not all(s.get("executed") and s.get("success") for s in r["steps"]):
        return "a step did not execute"
    return None


def check_dry_run(status, body):
    if status != 200:
        return f"status {status}: {body[:200]!r}"
    r = json.loads(body)
    if r.get("halted") or r.get("dry_run") is not True:
        return f"not a finished dry run: halted={r.get('halted')} dry_run={r.get('dry_run')}"
    if not r.get("steps") or any(s.get("executed") for s in r["steps"]):
        return "a dry-run step executed"
    return None


async def phase(server, method, path, body, check, duration, concurrency):
    raw = http_request(method, path, server.host, server.port, body)
    latencies, errors, samples = [], 0, []
    stop_at = time.perf_counter() + duration

    async def worker():
        nonlocal errors
        conn = Connection(server.host, server.port)
        try:
            while time.perf_counter() < stop_at:
                t0 = time.perf_counter()
                try:
                    status, resp = await asyncio.wait_for(conn.request(raw), REQUEST_TIMEOUT)
                    problem = check(status, resp)
                except (OSError, asyncio.IncompleteReadError, asyncio.TimeoutError, ValueError, AttributeError) as e:
                    problem = f"{type(e).__name__}: {e}"
                    await conn.close()
                latencies.append(time.perf_counter() - t0)
                if problem:
                    errors += 1
                    if len(samples) < 3:
                        samples.append(problem)
        finally:
            await conn.close()

    cpu0 = server.cpu_seconds()
    t0 = time.perf_counter()
    await asyncio.gather(*(worker() for _ in range(concurrency)))
    elapsed = time.perf_counter() - t0
    cpu1 = server.cpu_seconds()
    cpu = cpu1 - cpu0 if cpu0 is not None and cpu1 is not None else None
    return {"latencies": latencies, "errors": errors, "samples": samples, "seconds": elapsed, "cpu": cpu}


def merge(slices):
    """One phase's figures from its time slices."""
    latencies = sorted(x for s in slices for x in s["latencies"])
    n = len(latencies)
    seconds = sum(s["seconds"] for s in slices)
    cpus = [s["cpu"] for s in slices]
    cpu = None if any(c is None for c in cpus) else sum(cpus)
    errors = sum(s["errors"] for s in slices)
    samples = [x for s in slices for x in s["samples"]][:3]

    def pct(p):
        return latencies[max(0, min(n - 1, -(-n * p // 100) - 1))] * 1000 if n else float("nan")

    return {
        "requests": n,
        "errors": errors,
        "error_samples": samples,
        "seconds": round(seconds, 3),
        "rps": n / seconds if seconds else 0.0,
        "p50_ms": pct(50),
        "p99_ms": pct(99),
        "server_cpu_ms_per_request": cpu * 1000 / n if n and cpu is not None else None,
    }


def count_lines(path):
    try:
        with open(path, "rb") as f:
            return sum(1 for line in f if line.strip())
    except OSError:
        return 0


async def run(args, server):
    """Warm-up of each route, then `--rounds` rounds of health, chat, dry run, each slice
    `duration / rounds` long: interleaving spreads any outside load over the three alike."""
    chat = {"message": MESSAGE}
    dry = {"message": MESSAGE, "dry_run": True}
    phases = [
        ("GET /health (baseline)", "GET", "/health", None, check_health),
        ("POST /chat", "POST", "/chat", chat, check_chat),
        ("POST /chat dry_run", "POST", "/chat", dry, check_dry_run),
    ]
    slices = {name: [] for name, *_ in phases}
    warmups = {}
    traced_requests = 0
    for name, method, path, body, check in phases:
        if args.warmup > 0:
            w = await phase(server, method, path, body, check, args.warmup, args.concurrency)
            if path == "/chat":
                traced_requests += len(w["latencies"])
            warmups[name] = w
    for _ in range(args.rounds):
        for name, method, path, body, check in phases:
            s = await phase(
                server, method, path, body, check, args.duration / args.rounds, args.concurrency
            )
            if path == "/chat":
                traced_requests += len(s["latencies"])
            slices[name].append(s)
    results = {name: merge(sl) for name, sl in slices.items()}
    for name, w in warmups.items():
        if w["errors"]:
            results[name + " (warm-up)"] = merge([w])
    return results, traced_requests


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--bin", default=default_binary(), help="the toolforge binary")
    ap.add_argument("--duration", type=float, default=10.0, help="seconds per phase")
    ap.add_argument("--concurrency", type=int, default=8)
    ap.add_argument("--warmup", type=float, default=1.0, help="unmeasured seconds per route first")
    ap.add_argument("--rounds", type=int, default=5, help="interleaved slices each phase is split into")
    ap.add_argument("--json", help="also write the figures to this file")
    args = ap.parse_args()
    if not (0 < args.duration <= 600 and 0 < args.concurrency <= 256 and 0 <= args.warmup <= 60):
        ap.error("--duration must be in (0, 600], --concurrency in [1, 256], --warmup in [0, 60]")
    if not 1 <= args.rounds <= 100:
        ap.error("--rounds must be in [1, 100]")
    if not os.access(args.bin, os.X_OK):
        ap.error(f"{args.bin} is not an executable; build it (cargo build -p toolforge) or set TOOLFORGE_BIN")

    with tempfile.TemporaryDirectory(prefix="toolforge-chat-load-") as tmp:
        server = Server(args.bin, tmp)
        try:
            server.start()
            results, traced_requests = asyncio.run(run(args, server))
            rss_kb = server.proc_status("RssAnon")
            hwm_kb = server.proc_status("VmHWM")
        finally:
            server.stop()
        trace_lines = count_lines(server.traces)

    base = results["GET /health (baseline)"]["rps"]
    kind = build_kind(args.bin)
    print(
        f"toolforge serve ({kind} build), mock model, toolkit over stdio; "
        f"{os.cpu_count()} cores; concurrency {args.concurrency}, {args.duration:g} s per phase "
        f"in {args.rounds} interleaved rounds (after {args.warmup:g} s warm-up per route); "
        "client and server share the machine."
    )
    print()
    print("| route | requests | req/s | p50 ms | p99 ms | errors | server+toolkit CPU ms/req | req/s vs /health |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|")
    for name, r in results.items():
        cpu = r["server_cpu_ms_per_request"]
        print(
            f"| {name} | {r['requests']} | {r['rps']:.1f} | {r['p50_ms']:.2f} | {r['p99_ms']:.2f} "
            f"| {r['errors']} | {'-' if cpu is None else f'{cpu:.2f}'} | {r['rps'] / base if base else 0:.3f} |"
        )
    print()
    rss = f"{rss_kb / 1024:.1f} MiB" if rss_kb else "unknown"
    hwm = f"{hwm_kb / 1024:.1f} MiB" if hwm_kb else "unknown"
    print(f"Server RssAnon after the run: {rss} (peak VmHWM {hwm}).")
    print(f"Trace lines written: {trace_lines}; /chat requests executed (warm-up included): {traced_requests}.")

    failures = []
    for name, r in results.items():
        if r["errors"]:
            failures.append(f"{name}: {r['errors']} errors, e.g. {r['error_samples']}")
    if trace_lines != traced_requests:
        failures.append(f"trace lines {trace_lines} != executed requests {traced_requests}")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(
                {
                    "build": kind,
                    "cores": os.cpu_count(),
                    "concurrency": args.concurrency,
                    "duration_s": args.duration,
                    "warmup_s": args.warmup,
                    "rounds": args.rounds,
                    "phases": results,
                    "chat_vs_health": results["POST /chat"]["rps"] / base if base else None,
                    "dry_run_vs_health": results["POST /chat dry_run"]["rps"] / base if base else None,
                    "rss_anon_kib": rss_kb,
                    "peak_rss_kib": hwm_kb,
                    "trace_lines": trace_lines,
                    "traced_requests": traced_requests,
                    "failures": failures,
                },
                f,
                indent=2,
            )
    if failures:
        print("FAILED:\n  " + "\n  ".join(failures), file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
