"""The alert rules and the dashboard against the real thing (issue 34).

- ``promtool check rules`` accepts ``deploy/prometheus/alerts.yml`` and ``promtool test rules``
  passes ``alerts_test.yml``, which fires each rule just above its threshold and not at it; every
  row of seed 001's threshold table has its rules, each with a runbook the README has.
- A real Prometheus (Debian's, installed by ``make deps``) with ``deploy/prometheus``'s files,
  unchanged, scrapes a dev cluster started by ``epochal dev up``: every one of its seven targets
  is up and the rules are loaded. Every PromQL expression of the Grafana dashboard, its
  variables substituted, is accepted by that Prometheus and names only metrics it scraped.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import urllib.parse
import urllib.request
from pathlib import Path
from typing import Any

import pytest
import yaml

import epochal
from epochal.runtime.processes import free_address
from tests.harness import block_until

ROOT = Path(__file__).resolve().parents[2]
PROMETHEUS_DIR = ROOT / "deploy" / "prometheus"
DASHBOARD = ROOT / "deploy" / "grafana" / "dashboards" / "epochal-overview.json"
EPOCHAL = str(Path(sys.executable).with_name("epochal"))
pytestmark = pytest.mark.timeout(400)

# Seed 001's threshold table, row by row: the alerts for it (warning, then critical if any).
ROWS = {
    "CMS members not responding": ("EpochalCMSMemberUnreachable", "EpochalCMSQuorumUnreachable"),
    "commit latency": ("EpochalCommitLatencyHigh", "EpochalCommitLatencyCritical"),
    "commit retries": ("EpochalCommitRetries", "EpochalCommitRetriesCritical"),
    "progress barrier latency": ("EpochalProgressBarrierSlow", "EpochalProgressBarrierStuck"),
    "consistency-level relaxations": ("EpochalBarrierRelaxed", "EpochalBarrierRelaxedOften"),
    "stale-metadata hits": ("EpochalCoordinatorBehind", "EpochalCoordinatorBehindCritical"),
    "epoch difference between nodes": ("EpochalEpochSpread",),
}


def promtool(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["promtool", *args], capture_output=True, text=True, timeout=120, cwd=PROMETHEUS_DIR
    )


def rules() -> list[dict[str, Any]]:
    loaded = yaml.safe_load((PROMETHEUS_DIR / "alerts.yml").read_text())
    return [rule for group in loaded["groups"] for rule in group["rules"]]


def readme_anchors() -> set[str]:
    """GitHub's anchors of the README's headings."""
    anchors = set()
    for line in (ROOT / "README.md").read_text().splitlines():
        if line.startswith("#"):
            title = line.lstrip("#").strip().lower()
            anchors.add(re.sub(r"[^a-z0-9 _-]", "", title).replace(" ", "-"))
    return anchors


def test_the_alert_rules_check_and_fire_just_above_each_threshold_not_at_it() -> None:
    checked = promtool("check", "rules", "alerts.yml")
    assert checked.returncode == 0, checked.stdout + checked.stderr
    tested = promtool("test", "rules", "alerts_test.yml")
    assert tested.returncode == 0, tested.stdout + tested.stderr
    by_name = {rule["alert"]: rule for rule in rules()}
    assert sorted(by_name) == sorted(a for row in ROWS.values() for a in row)
    for alerts in ROWS.values():
        assert by_name[alerts[0]]["labels"]["severity"] == "warning"
        if len(alerts) > 1:
            assert by_name[alerts[1]]["labels"]["severity"] == "critical"
    # Every rule is tested: alerts_test.yml names each at least twice (above and at).
    tests = (PROMETHEUS_DIR / "alerts_test.yml").read_text()
    for name in by_name:
        assert len(re.findall(rf"alertname: {name}\b", tests)) >= 2, name
    anchors = readme_anchors()
    for name, rule in by_name.items():
        runbook = rule["annotations"]["runbook"]
        assert runbook.startswith("README.md#") and runbook.partition("#")[2] in anchors, name


def api(prometheus: str, path: str, **query: str) -> Any:
    url = f"http://{prometheus}/api/v1/{path}"
    if query:
        url += "?" + urllib.parse.urlencode(query)
    with urllib.request.urlopen(url, timeout=10) as answer:
        return json.loads(answer.read())


def dashboard_queries() -> list[str]:
    loaded = json.loads(DASHBOARD.read_text())
    exprs = [target["expr"] for panel in loaded["panels"] for target in panel["targets"]]
    variables = {"$__rate_interval": "1m", "$instance": ".*"}
    for variable in loaded["templating"]["list"]:
        if variable["type"] == "query":
            exprs.append(variable["definition"].removeprefix("label_values(").split(",")[0])
    substituted = []
    for expr in exprs:
        for name, value in variables.items():
            expr = expr.replace(name, value)
        assert "$" not in expr, expr
        substituted.append(expr)
    return substituted


def metric_names(expr: str) -> set[str]:
    return {m.group(0) for m in re.finditer(r"\bepochal_[a-z0-9_]+", expr)}


def test_a_real_prometheus_scrapes_the_dev_cluster_and_the_dashboard_queries_parse(
    tmp_path: Path,
) -> None:
    # The layout deploy/prometheus/prometheus.yml expects: the dev cluster in var/devcluster
    # two folders up from it — its files are used unchanged.
    shutil.copytree(PROMETHEUS_DIR, tmp_path / "deploy" / "prometheus")
    data_dir = tmp_path / "var" / "devcluster"
    listen = free_address(())
    prometheus = None

    def dev(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [EPOCHAL, "dev", *args, "--data-dir", str(data_dir)],
            capture_output=True,
            text=True,
            timeout=240,
            env={**os.environ, "EPOCHAL_TRACE_DIR": ""},
        )

    up = None
    try:
        up = dev("up", "--no-traces")
        assert up.returncode == 0, up.stdout + up.stderr
        assert "Prometheus targets in" in up.stdout
        exported = re.search(r"^  export EPOCHAL_CLUSTER=(\S+)$", up.stdout, re.M)
        assert exported, up.stdout
        tls = dict(re.findall(r"^  export (EPOCHAL_TLS_\w+)=(\S+)$", up.stdout, re.M))
        files = epochal.TlsFiles(*(tls[f"EPOCHAL_TLS_{p}"] for p in ("CA", "CERT", "KEY")))
        # A workload, so that the per-range series (reconciliation lag) exist.
        with epochal.Client(exported.group(1).split(","), tls=files) as client:
            client.create_keyspace("shop", replication_factor=3, tracked=True)
            client.create_table(
                "shop", "carts", {"user": "text", "qty": "int"}, partition_key=["user"]
            )
            for n in range(20):
                client.write("shop", "carts", {"user": f"u{n}", "qty": n})
        prometheus = subprocess.Popen(
            [
                "prometheus",
                "--config.file=deploy/prometheus/prometheus.yml",
                f"--storage.tsdb.path={tmp_path / 'tsdb'}",
                f"--web.listen-address={listen}",
            ],
            cwd=tmp_path,
            stdout=subprocess.DEVNULL,
            stderr=(tmp_path / "prometheus.log").open("wb"),
        )

        def targets_up() -> list[dict[str, Any]] | None:
            try:
                active = api(listen, "targets")["data"]["activeTargets"]
            except OSError:
                return None
            up = [t for t in active if t["health"] == "up"]
            return active if len(active) == 7 and len(up) == 7 else None

        active = block_until("Prometheus scrapes all seven processes", targets_up, 90, 0.5)
        services = sorted(t["labels"]["service"] for t in active)
        assert services == ["cms"] * 3 + ["reconciler"] + ["replica"] * 3
        groups = api(listen, "rules")["data"]["groups"]
        loaded = {rule["name"] for group in groups for rule in group["rules"]}
        assert loaded == {rule["alert"] for rule in rules()}

        named = set().union(*(metric_names(expr) for expr in dashboard_queries()))

        def every_named_metric_scraped() -> set[str] | None:
            scraped = set(api(listen, "label/__name__/values")["data"])
            return scraped if named <= scraped else None

        scraped = block_until("every metric the dashboard names", every_named_metric_scraped, 90, 1)
        for expr in dashboard_queries():
            answer = api(listen, "query", query=expr)
            assert answer["status"] == "success", (expr, answer)

            def answered(expr: str = expr) -> bool:  # a rate needs two scrapes in its window
                return bool(api(listen, "query", query=expr)["data"]["result"])

            block_until(f"data for {expr}", answered, 60, 1)
            for name in metric_names(expr):
                assert name in scraped, (name, expr)
    finally:
        if prometheus is not None:
            prometheus.terminate()
            prometheus.wait(timeout=30)
        down = dev("down")
        if up is not None and up.returncode == 0:  # else nothing runs to stop
            assert down.returncode == 0, down.stdout + down.stderr
