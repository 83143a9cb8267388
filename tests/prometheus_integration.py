#!/usr/bin/env python3
"""End to end with a real Prometheus server (Debian package `prometheus`).

Starts `stragglar run --metrics-port P` (or, with --mpi, four MPI processes under
libstragglar_mpi.so) and a Prometheus server on loopback that scrapes it every
second and evaluates dashboards/stragglar-rules.yml; then, through Prometheus's HTTP API, asserts
that every contract metric arrived with its labels, that the detector's verdict is what the run
injected, that every PromQL expression of the dashboard and of the rules returns data, and that the
alerts are in the expected state. With --save DIR it also keeps every panel's query_range result
(the input of scripts/render-dashboard.py). Exits non-zero, naming each failure, otherwise.
Standard library only.
"""
import argparse
import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
import urllib.parse
import urllib.request

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DASHBOARD = os.path.join(ROOT, "dashboards", "stragglar-dashboard.json")
RULES = os.path.join(ROOT, "dashboards", "stragglar-rules.yml")
STRAGGLER = 5
RANKS = 8

# Contract metric -> labels every one of its series must carry (besides comm and rank).
CONTRACT = {
    "stragglar_collective_calls_total": ["algorithm"],
    "stragglar_collective_duration_seconds_bucket": ["algorithm", "size_bucket", "le"],
    "stragglar_collective_duration_seconds_count": ["algorithm", "size_bucket"],
    "stragglar_arrival_lag_seconds_bucket": ["le"],
    "stragglar_arrival_lag_seconds_sum": [],
    "stragglar_straggler_rank": [],
    "stragglar_straggler_persistence_ratio": [],
    "stragglar_time_saved_seconds_total": [],
    "stragglar_time_lost_seconds_total": [],
    "stragglar_policy_switches_total": [],
    "stragglar_wait_seconds_total": [],
    "stragglar_slow_link_rank": [],
    "stragglar_link_bandwidth_bytes_per_second": [],
}

failures = []


def check(condition, message):
    if not condition:
        failures.append(message)
        print("FAIL:", message, flush=True)
    return condition


def metric_port_of(base, rank):
    return base + int(rank)


def free_ports(count):
    """A base port with `count` free ports from it (the MPI ranks' endpoints)."""
    for _ in range(100):
        base = free_port()
        if base + count > 65535:
            continue
        try:
            sockets = []
            for port in range(base, base + count):
                s = socket.socket()
                sockets.append(s)
                s.bind(("127.0.0.1", port))
            return base
        except OSError:
            continue
        finally:
            for s in sockets:
                s.close()
    raise RuntimeError(f"no {count} consecutive free ports")


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Prometheus:
    def __init__(self, port):
        self.base = f"http://127.0.0.1:{port}/api/v1/"

    def get(self, path, **params):
        url = self.base + path + ("?" + urllib.parse.urlencode(params) if params else "")
        with urllib.request.urlopen(url, timeout=10) as response:
            body = json.load(response)
        if body.get("status") != "success":
            raise RuntimeError(f"{path} {params}: {body}")
        return body["data"]

    def query(self, expr, at):
        return self.get("query", query=expr, time=f"{at:.3f}")["result"]


def wait_until(predicate, timeout_s, what):
    deadline = time.time() + timeout_s
    while time.time() < deadline:
        try:
            if predicate():
                return True
        except Exception:  # the server may not be up yet
            pass
        time.sleep(0.5)
    raise RuntimeError(f"timed out after {timeout_s}s waiting for {what}")


def panel_targets(panels, row=""):
    """(row title, panel title, expr) of every query; a panel belongs to the row before it."""
    for panel in panels:
        if panel.get("type") == "row":
            row = panel.get("title", "")
        yield from panel_targets(panel.get("panels", []), row)
        for target in panel.get("targets", []):
            if target.get("expr"):
                yield row, panel.get("title", "?"), target["expr"]


# The dashboard row of pipeline parallelism's links: data only from a pipeline job.
PIPELINE_ROW = "Pipeline links"
# Its metrics -> labels every series must carry (besides comm and rank).
PIPELINE_CONTRACT = {
    "stragglar_link_transfer_seconds_bucket": ["src", "dst", "le"],
    "stragglar_link_delay_seconds": ["src", "dst"],
    "stragglar_slow_link": ["src", "dst"],
    "stragglar_pipeline_warmup_forwards": ["stage"],
}
PIPELINE_STAGES = 4
SLOW_LINK = ("1", "2")


def substitute(expr, rate_interval="1m"):
    return (expr.replace("$__rate_interval", rate_interval).replace("${comm}", ".*")
            .replace("$comm", ".*"))


def check_pipeline(prometheus, at, work, start, end):
    """The link metrics of `stragglar pipeline-run`, the dashboard's pipeline row and the slow-link
    alert, as Prometheus saw them."""
    links = {(str(i), str(i + 1)) for i in range(PIPELINE_STAGES - 1)}
    links |= {(b, a) for a, b in links}
    for name, labels in PIPELINE_CONTRACT.items():
        series = prometheus.query(name, at)
        if not check(series, f"{name}: no series"):
            continue
        for each in series:
            missing = [l for l in ["comm", "rank"] + labels if l not in each["metric"]]
            check(not missing, f"{name}: series {each['metric']} lacks {missing}")
        if "src" in labels:
            seen = {(s["metric"].get("src"), s["metric"].get("dst")) for s in series}
            check(seen == links, f"{name}: links {sorted(seen)}, expected {sorted(links)}")
    slow = {(s["metric"]["src"], s["metric"]["dst"])
            for s in prometheus.query("stragglar_slow_link == 1", at)}
    check(slow == {SLOW_LINK}, f"slow links {slow}, expected {SLOW_LINK}")
    delay = prometheus.query(
        f'stragglar_link_delay_seconds{{src="{SLOW_LINK[0]}",dst="{SLOW_LINK[1]}"}}', at)
    check(delay and abs(float(delay[0]["value"][1]) - 0.010) < 0.002,
          f"the slow link's delay {delay}, expected about 10 ms")
    with open(f"{work}/advice.json") as f:
        advice = json.load(f)
    check(advice["slow_link"] == {"src": int(SLOW_LINK[0]), "dst": int(SLOW_LINK[1])},
          f"advice file's slow link {advice['slow_link']}")
    warmup = {int(s["metric"]["stage"]): int(float(s["value"][1]))
              for s in prometheus.query("stragglar_pipeline_warmup_forwards", at)}
    check([warmup.get(i) for i in range(PIPELINE_STAGES)] == advice["warmup"],
          f"warm-up gauges {warmup}, advice file {advice['warmup']}")
    info = prometheus.query("stragglar_build_info", at)
    check({s["metric"].get("rank") for s in info} == {str(i) for i in range(PIPELINE_STAGES)} and
          all(s["metric"].get("backend") == "host" for s in info), f"build info {info}")
    with open(DASHBOARD) as f:
        dashboard = json.load(f)
    targets = [(t, e) for row, t, e in panel_targets(dashboard["panels"]) if row == PIPELINE_ROW]
    check(targets, f"the dashboard has no '{PIPELINE_ROW}' row")
    for title, expr in targets:
        check(prometheus.query(substitute(expr), at), f"dashboard panel '{title}': no data")
    rules = [r for g in prometheus.get("rules")["groups"] for r in g["rules"]]
    alert = next((r for r in rules if r["name"] == "StragglarSlowLink"), None)
    if check(alert, "StragglarSlowLink is not loaded"):
        check(alert.get("health") == "ok", f"StragglarSlowLink: {alert.get('lastError')}")
        states = {s["metric"].get("alertstate") for s in prometheus.query(
            'ALERTS{alertname="StragglarSlowLink"}', at)}
        check(states & {"pending", "firing"}, f"StragglarSlowLink was {states or 'inactive'}")
    print(f"checked {len(PIPELINE_CONTRACT)} link metrics, {len(targets)} pipeline panels, the "
          f"slow-link alert; advice {advice['warmup']} ({advice['speedup']:.2f}x predicted)")
    print(f"{len(failures)} failure(s)" if failures else "OK")
    return 1 if failures else 0


def main():
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--stragglar", default=os.path.join(ROOT, "build", "bin", "stragglar"))
    parser.add_argument("--prometheus", default=shutil.which("prometheus") or "prometheus")
    parser.add_argument("--iterations", type=int, default=192)
    parser.add_argument("--version", required=True,
                        help="the version stragglar_build_info must carry (CMake's PROJECT_VERSION)")
    parser.add_argument("--mpi", metavar="BUILD_DIR",
                        help="scrape the MPI preload library instead: 4 processes of "
                             "stragglar-mpi-bench with libstragglar_mpi.so, one endpoint per rank "
                             "(STRAGGLAR_METRICS_PORT = base port)")
    parser.add_argument("--pipeline", action="store_true",
                        help="scrape `stragglar pipeline-run` instead: 4 stages, link 1-2 slow")
    parser.add_argument("--save", help="directory to keep the panels' query_range results in")
    parser.add_argument("--save-rate-interval", default="15s",
                        help="$__rate_interval of the saved query_range results (Grafana's own "
                             "choice for a 1 s scrape would be shorter than the test's 1m)")
    args = parser.parse_args()
    if not shutil.which(args.prometheus) and not os.path.exists(args.prometheus):
        print("prometheus not found: run scripts/install-deps.sh (Debian package prometheus)")
        return 1

    work = tempfile.mkdtemp(prefix="stragglar-prometheus-")
    mpi = args.mpi is not None
    # The host runtime serves its 8 threads from one endpoint, as comm baseline and adaptive; the
    # MPI library serves each process's own rank on base + local rank, as comm world.
    ranks = 4 if mpi else RANKS
    straggler = ranks - 1 if mpi else STRAGGLER
    comms = ("world",) if mpi else ("adaptive", "baseline")
    adaptive = comms[0]
    metrics_port = free_ports(ranks) if mpi else free_port()
    web_port = free_port()
    targets = ", ".join(f'"127.0.0.1:{metrics_port + r}"' for r in range(ranks if mpi else 1))
    config = os.path.join(work, "prometheus.yml")
    with open(config, "w") as f:
        f.write(f"""global:
  scrape_interval: 1s
  evaluation_interval: 1s
rule_files:
  - {RULES}
scrape_configs:
  - job_name: stragglar
    static_configs:
      - targets: [{targets}]
""")
    processes = []
    try:
        server = subprocess.Popen(
            [args.prometheus, f"--config.file={config}", f"--storage.tsdb.path={work}/data",
             f"--web.listen-address=127.0.0.1:{web_port}", "--log.level=warn"],
            stdout=open(os.path.join(work, "prometheus.log"), "w"), stderr=subprocess.STDOUT)
        processes.append(server)
        prometheus = Prometheus(web_port)
        wait_until(lambda: prometheus.get("status/runtimeinfo") is not None, 60,
                   "the Prometheus server")
        start = time.time()
        if mpi:
            build = os.path.abspath(args.mpi)
            env = dict(os.environ, STRAGGLAR_METRICS_PORT=str(metrics_port),
                       STRAGGLAR_EPOCH_CALLS="16")
            command = [os.path.join(ROOT, "tests", "mpi", "run_check.sh"), build, str(ranks),
                       "yes", os.path.join(build, "bin", "stragglar-mpi-bench"),
                       "--min-bytes=4MiB", "--max-bytes=4MiB", "--delays=20ms", "--warmup=16",
                       f"--iterations={args.iterations}"]
        elif args.pipeline:
            env = None
            command = [args.stragglar, "pipeline-run", f"--metrics-port={metrics_port}",
                       f"--stages={PIPELINE_STAGES}", "--microbatches=16", "--forward=2ms",
                       "--backward=4ms", f"--link-delay={SLOW_LINK[0]}-{SLOW_LINK[1]}:10ms",
                       f"--iterations={args.iterations}", "--apply-advice",
                       f"--advice-file={work}/advice.json", "--metrics-hold=4s"]
        else:
            env = None
            command = [args.stragglar, "run", f"--metrics-port={metrics_port}",
                       f"--iterations={args.iterations}", "--bytes=4MiB",
                       f"--straggler={STRAGGLER}", "--metrics-hold=4s",
                       f"--summary-json={work}/summary.json"]
        run = subprocess.Popen(command, env=env, stdout=subprocess.PIPE,
                               stderr=subprocess.STDOUT, text=True)
        processes.append(run)
        output, _ = run.communicate(timeout=600)
        end = time.time()
        print(output, flush=True)
        if not check(run.returncode == 0, f"{command[0]} exited with {run.returncode}"):
            return 1
        # Evaluate just before the run ended (the host run's last scrape was during its hold).
        at = end - 2
        wait_until(lambda: prometheus.query("up", at) and prometheus.query(
            "stragglar_slow_link" if args.pipeline else "stragglar_collective_calls_total", at),
            30, "a scrape")
        if args.pipeline:
            return check_pipeline(prometheus, at, work, start, end)

        # 1. Every contract metric, with its labels, for both communicators and every rank.
        for name, labels in CONTRACT.items():
            series = prometheus.query(name, at)
            if not check(series, f"{name}: no series"):
                continue
            for each in series:
                metric = each["metric"]
                missing = [l for l in ["comm", "rank"] + labels if l not in metric]
                check(not missing, f"{name}: series {metric} lacks {missing}")
            seen = {(s["metric"].get("comm"), s["metric"].get("rank")) for s in series}
            wanted = {(c, str(r)) for c in comms for r in range(ranks)}
            check(wanted <= seen, f"{name}: missing comm/rank pairs {sorted(wanted - seen)}")
            if mpi:  # each rank from its own process's endpoint: base port + rank
                for each in series:
                    metric = each["metric"]
                    check(metric.get("instance") ==
                          f"127.0.0.1:{metric_port_of(metrics_port, metric.get('rank'))}",
                          f"{name}: rank {metric.get('rank')} served by {metric.get('instance')}")
        # stragglar_build_info: one series per comm and rank, with the version and the backend.
        info = prometheus.query("stragglar_build_info", at)
        pairs = {(s["metric"].get("comm"), s["metric"].get("rank")) for s in info}
        wanted = {(c, str(r)) for c in comms for r in range(ranks)}
        check(pairs == wanted and len(info) == len(wanted),
              f"stragglar_build_info series {sorted(pairs)}, expected {sorted(wanted)}")
        for each in info:
            metric = each["metric"]
            check(metric.get("version") == args.version and float(each["value"][1]) == 1,
                  f"stragglar_build_info version: {metric}, expected {args.version}")
            if mpi:
                check(metric.get("backend") == "mpi" and
                      metric.get("backend_version", "").startswith("Open MPI v"),
                      f"stragglar_build_info backend: {metric}")
            else:
                check(metric.get("backend") == "host" and "backend_version" not in metric,
                      f"stragglar_build_info backend: {metric}")
        buckets = {s["metric"]["size_bucket"]
                   for s in prometheus.query("stragglar_collective_duration_seconds_count", at)}
        check(buckets == {"4MiB"}, f"size_bucket values {buckets}, expected 4MiB only")

        # 2. What the run did, as Prometheus saw it.
        for s in prometheus.query(f'stragglar_straggler_rank{{comm="{adaptive}"}}', at):
            check(float(s["value"][1]) == straggler, f"straggler rank {s}")
        persistence = {s["metric"]["rank"]: float(s["value"][1]) for s in prometheus.query(
            f'stragglar_straggler_persistence_ratio{{comm="{adaptive}"}}', at)}
        check(persistence.get(str(straggler), 0) > 0.5, f"persistence {persistence}")
        check(all(v < 0.5 for r, v in persistence.items() if r != str(straggler)),
              f"persistence of punctual ranks {persistence}")
        calls = prometheus.query('sum by (comm, rank) (stragglar_collective_calls_total)', at)
        check(all(float(s["value"][1]) > 0 for s in calls), f"calls {calls}")
        stragglar_calls = prometheus.query(
            f'sum(stragglar_collective_calls_total{{comm="{adaptive}",algorithm="stragglar"}})', at)
        check(stragglar_calls and float(stragglar_calls[0]["value"][1]) > 0,
              f"{adaptive} ran no StragglAR call: {stragglar_calls}")
        if not mpi:  # the MPI processes exit at once: no final scrape to compare with
            saved = prometheus.query('max(stragglar_time_saved_seconds_total{comm="adaptive"})',
                                     at)
            check(saved and float(saved[0]["value"][1]) > 0, f"no time saved: {saved}")
            with open(f"{work}/summary.json") as f:
                summary = json.load(f)
            final_calls = prometheus.query(
                'sum by (rank) (stragglar_collective_calls_total{comm="adaptive"})', end + 1)
            check(all(float(s["value"][1]) == summary["iterations"] for s in final_calls),
                  f"final call counts {final_calls} != {summary['iterations']} iterations")

        # 3. Every expression of the dashboard returns data.
        with open(DASHBOARD) as f:
            dashboard = json.load(f)
        targets = [(title, expr) for row, title, expr in panel_targets(dashboard["panels"])
                   if row != PIPELINE_ROW]
        check(targets, "the dashboard has no queries")
        saved_panels = []
        for title, expr in targets:
            result = prometheus.query(substitute(expr), at)
            check(result, f"dashboard panel '{title}': no data for {expr}")
            if args.save:
                saved_panels.append({"title": title, "expr": expr, "result": prometheus.get(
                    "query_range", query=substitute(expr, args.save_rate_interval),
                    start=f"{start:.3f}",
                    end=f"{end:.3f}", step="1")["result"]})

        # 4. Every rule loads, is healthy, and returns data; the alerts are in the right state.
        groups = prometheus.get("rules")["groups"]
        rules = [rule for group in groups for rule in group["rules"]]
        check(rules, "no rules loaded")
        for rule in rules:
            check(rule.get("health") == "ok", f"rule {rule['name']}: {rule.get('lastError')}")
            if rule["type"] == "recording":
                check(prometheus.query(rule["name"], at), f"recording rule {rule['name']}: no data")
        alerts = {rule["name"]: rule for rule in rules if rule["type"] == "alerting"}
        # Alert states as of `at`, from the ALERTS series Prometheus records while an alert is
        # pending or firing: the rules API only gives the state now, and once the run's endpoint
        # is gone its series turn stale and the alerts go inactive (a race with these checks).
        def alert_states(name):
            return {s["metric"].get("alertstate")
                    for s in prometheus.query(f'ALERTS{{alertname="{name}"}}', at)}
        straggler_alert = alerts.get("StragglarPersistentStraggler")
        if check(straggler_alert, "StragglarPersistentStraggler is not loaded"):
            check(prometheus.query(straggler_alert["query"], at),
                  "StragglarPersistentStraggler's expression is empty with a straggler present")
            states = alert_states("StragglarPersistentStraggler")
            check(states & {"pending", "firing"},
                  f"StragglarPersistentStraggler was not pending or firing: {states or 'inactive'}")
        check(not alert_states("StragglarSlowLink"), "StragglarSlowLink is active without links")
        stall_alert = alerts.get("StragglarRankStalled")
        if check(stall_alert, "StragglarRankStalled is not loaded"):
            check(not prometheus.query(stall_alert["query"], at),
                  "StragglarRankStalled's expression matched although every rank advanced")
            states = alert_states("StragglarRankStalled")
            check(not states, f"StragglarRankStalled was {states}")

        if args.save:
            os.makedirs(args.save, exist_ok=True)
            with open(os.path.join(args.save, "panels.json"), "w") as f:
                json.dump({"start": start, "end": end, "panels": saved_panels}, f)
            if not mpi:
                shutil.copy(f"{work}/summary.json", os.path.join(args.save, "summary.json"))
        print(f"checked {len(CONTRACT)} metrics, {len(targets)} dashboard queries, "
              f"{len(rules)} rules against Prometheus on 127.0.0.1:{web_port}")
    finally:
        for process in processes:
            if process.poll() is None:
                process.terminate()
                try:
                    process.wait(timeout=10)
                except subprocess.TimeoutExpired:
                    process.kill()
        if failures:
            print(f"Prometheus log: {work}/prometheus.log")
        else:
            shutil.rmtree(work, ignore_errors=True)
    if failures:
        print(f"{len(failures)} failure(s)")
        return 1
    print("OK")
    return 0


if __name__ == "__main__":
    sys.exit(main())
