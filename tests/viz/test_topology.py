"""Topology as text and pictures: Mermaid and DOT snapshots for every topology and every shipped
workflow, escaping, determinism, and local rendering with Graphviz."""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET
from pathlib import Path

import networkx as nx
import pytest

from aworld_graph import Swarm
from aworld_graph.errors import ConfigError
from aworld_graph.viz import render, to_dot, to_html, to_mermaid, to_networkx, view_of
from aworld_graph.viz.dot import dot_text
from aworld_graph.viz.mermaid import mermaid_text

from . import snapshot as snapshots
from .chromium import need_tool
from .swarms import CASES, escaping, handoff, nested, parallel, report

ROOT = Path(__file__).resolve().parents[2]
WORKFLOWS = sorted((ROOT / "workflows").glob("*.yaml"))


@pytest.mark.parametrize("case", sorted(CASES))
def test_mermaid_and_dot_snapshots(case: str) -> None:
    swarm = CASES[case]()
    snapshots.check(f"{case}.mmd", to_mermaid(swarm))
    snapshots.check(f"{case}.dot", to_dot(swarm))


def test_tool_execution_nodes_snapshot() -> None:
    snapshots.check("report_tools.mmd", to_mermaid(report(), tools=True))
    snapshots.check("report_tools.dot", to_dot(report(), tools=True))


@pytest.mark.parametrize("path", WORKFLOWS, ids=lambda p: p.stem)
def test_shipped_workflow_snapshots(path: Path) -> None:
    from aworld_graph.spec import load_workflow

    swarm = load_workflow(path)
    snapshots.check(f"workflow_{path.stem}.mmd", to_mermaid(swarm))
    snapshots.check(f"workflow_{path.stem}.dot", to_dot(swarm))


def test_no_stale_snapshots() -> None:
    expected = {f"{c}.{ext}" for c in CASES for ext in ("mmd", "dot")}
    expected |= {"report_tools.mmd", "report_tools.dot"}
    expected |= {f"workflow_{p.stem}.{ext}" for p in WORKFLOWS for ext in ("mmd", "dot")}
    present = {p.name for p in snapshots.DIR.glob("*") if p.suffix in (".mmd", ".dot")}
    assert present - expected == set(), "snapshots without a case; delete them"


def test_output_is_deterministic_and_independent_of_insertion_order() -> None:
    assert to_mermaid(parallel()) == to_mermaid(parallel())
    assert to_dot(nested()) == to_dot(nested())
    from aworld_graph import HandoffSwarm

    from .swarms import say

    a = HandoffSwarm(say("x"), say("y"), say("z"), topology=[("x", "y"), ("x", "z")], name="h")
    b = HandoffSwarm(
        say("z"), say("y"), say("x"), topology=[("x", "z"), ("x", "y")], root_agent="x", name="h"
    )
    assert to_mermaid(a) == to_mermaid(b) and to_dot(a) == to_dot(b)


def test_every_kind_of_element_is_drawn() -> None:
    text = to_mermaid(handoff(), tools=True)
    assert 'n_triage ==>|"handoff"| n_writer' in text and 'n_writer ==>|"handoff"| n_triage' in text
    assert "t_triage[(" in text and "class n_triage root" in text
    team = to_mermaid(CASES["team_of_swarms"]())
    assert 'n_boss <-.->|"delegate"| n_crew' in team and "subgraph n_crew[" in team
    critic = to_mermaid(CASES["critic_loop"]())
    assert 'n_reviewer -.->|"retry (max 2)"| n_writer' in critic and "n_reviewer{{" in critic
    cond = to_dot(CASES["conditional"]())
    assert 'label="answer == \\"math\\""' in cond and 'label="<lambda>"' in cond
    loop = to_mermaid(CASES["declared_loop"]())
    assert 'n_check -.->|"score #lt; 0.5, max 3"| n_ask' in loop
    par = to_mermaid(parallel())
    assert 'j_merge -->|"all of x, y2, z"| n_merge' in par and par.count('|"parallel"|') == 3
    human = to_mermaid(CASES["human_and_function"]())
    assert 'n_approval[/"approval<br/>human input"\\]:::human' in human and "n_count[[" in human
    dot = to_dot(nested())
    assert 'subgraph "cluster_n_deep__deeper"' in dot and 'lhead="cluster_n_inner"' in dot


def test_labels_are_escaped() -> None:
    assert mermaid_text('a "b" <c> #d | `e` & f\nnext') == (
        "a #quot;b#quot; #lt;c#gt; #35;d #124; #96;e#96; #amp; f<br/>next"
    )
    assert dot_text('say "hi"\\n\nnext') == '"say \\"hi\\"\\\\n\\nnext"'
    text = to_mermaid(escaping())
    for line in text.splitlines()[4:]:
        labels = re.findall(r'"(.*?)"', line)
        assert all('"' not in x and "<b>" not in x and "|" not in x for x in labels), line
    assert 'n_end("end"):::agent' in text  # a node named "end" never becomes Mermaid's keyword


def test_networkx_view_matches_the_swarm() -> None:
    graph = to_networkx(handoff())
    assert isinstance(graph, nx.DiGraph)
    assert graph.edges["triage", "writer"]["kind"] == "handoff" and graph.nodes["triage"]["root"]
    solo = to_networkx(CASES["single"]())
    assert list(solo.nodes) == ["solo"]


def test_svg_and_png_are_rendered_locally_with_every_node() -> None:
    need_tool("dot")
    swarm = nested()
    svg = render(swarm, "svg")
    root = ET.fromstring(svg)
    ids = {g.get("id") for g in root.iter("{http://www.w3.org/2000/svg}g")}
    view = view_of(swarm)
    assert {n.id for n in view.nodes} | {c.id for c in view.clusters} <= ids
    png = render(swarm, "png")
    assert png[:8] == b"\x89PNG\r\n\x1a\n" and len(png) > 5000
    odd = ET.fromstring(render(escaping(), "svg"))
    texts = {t.text for t in odd.iter("{http://www.w3.org/2000/svg}text")}
    assert 'say "hi" <b>#1</b> & {more}; [x] (y) `z` \\ end (root)' in texts
    with pytest.raises(ValueError, match="svg' or 'png"):
        render(swarm, "gif")


def test_missing_graphviz_says_how_to_install(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv("PATH", str(tmp_path))
    with pytest.raises(ConfigError, match="apt-get install graphviz"):
        render(parallel(), "png")
    page = to_html(parallel())  # the page falls back to its own layout
    assert '<g id="n_plan" class="node agent root">' in page


def test_cards_carry_the_node_card_version_from_the_swarm_info() -> None:
    from .swarms import say

    swarm = Swarm(say("a"), say("b"), info={"cards": {"a": {"version": 3, "card": "nodes/a.yaml"}}})
    cards = {n.name: n.card for n in view_of(swarm).nodes}
    assert cards["a"]["version"] == 3 and cards["a"]["card"] == "nodes/a.yaml"
    assert "version" not in cards["b"] and cards["a"]["system_prompt"]


def test_a_critic_is_drawn_in_front_of_its_judged_nodes_branches() -> None:
    from aworld_graph import Agent, Critic, edge

    s, p = Agent(name="s"), Agent(name="p")
    crit = Critic(name="crit", judges=s, scorer=lambda a, st: 1.0)
    swarm = Swarm(s, crit, p, topology=[s], edges=[edge(s, p, "len(answer) > 0")])
    drawn = {(e.source, e.target, e.kind) for e in view_of(swarm).edges}
    assert ("n_s", "n_crit", "flow") in drawn and ("n_crit", "n_p", "flow") in drawn
    assert not any(src == "n_s" and dst == "n_p" for src, dst, _ in drawn)
    text = to_mermaid(swarm)
    assert 'n_crit -->|"len(answer) #gt; 0"| n_p' in text, text
    assert "n_s -->" not in text.replace("n_s --> n_crit", "")
