"""docs/python.md's walkthrough runs as written and reproduces `attnum heads` on the same
stories260K captures (data/ in the repository; the books from Debian packages)."""
import os
import re

import pytest

from conftest import ROOT, cli


def test_walkthrough_reproduces_the_head_table(tmp_path, monkeypatch, capsys):
    blocks = re.findall(r"```python\n(.*?)```", (ROOT / "docs" / "python.md").read_text(), re.S)
    walkthrough = blocks[1:]  # blocks[0] is the five-line example
    assert len(walkthrough) >= 4
    monkeypatch.chdir(ROOT)
    monkeypatch.setenv("WALKTHROUGH_OUT", str(tmp_path))
    ns = {}
    for code in walkthrough:
        exec(compile(code, "docs/python.md", "exec"), ns)
    printed = capsys.readouterr().out
    assert "fa3            rotate" in printed
    got = ns["table"]()
    want = cli("heads", "--quiet", "--captures", *ns["captures"], "--kernel", "fa3,sage2pp-sm89", "--json",
               json_out=True)
    assert len(got) == len(want) == 6
    for g, w in zip(got, want):
        assert (g["kernel"], g["transform"]) == (w["kernel"], w["transform"])
        assert g["n_heads"] == w["n_heads"] == 40
        assert g["n_harmed"] == w["n_harmed"], (g, w)
        for key in ("auc", "precision", "recall", "spearman"):
            if w[key] is None:
                assert g[key] is None, (key, g, w)
            else:
                assert g[key] == pytest.approx(w[key], abs=1e-9), (key, g, w)
