"""docs/python.md's walkthrough runs as written, in this process (no subprocess in it), and
reproduces `attnum heads` on the same stories260K captures byte for byte (data/ in the repository;
the books from Debian packages); the API section's five lines run too."""
import re

from conftest import ROOT, cli, comparable


def blocks():
    return re.findall(r"```python\n(.*?)```", (ROOT / "docs" / "python.md").read_text(), re.S)


def test_five_lines_run():
    ns = {}
    exec(compile(blocks()[0], "docs/python.md", "exec"), ns)
    assert ns["r"].stages["p_cast"].shape == (8,)


def test_readme_python_example_is_the_one_run_here():
    readme = re.findall(r"```python\n(.*?)```", (ROOT / "README.md").read_text(), re.S)
    assert readme == [blocks()[0]]


def test_walkthrough_reproduces_the_head_table(tmp_path, monkeypatch, capsys):
    walkthrough = blocks()[1:]  # blocks[0] is the five-line example
    assert len(walkthrough) >= 4
    for code in walkthrough:
        assert "subprocess" not in code and "frombuffer" not in code
    monkeypatch.chdir(ROOT)
    monkeypatch.setenv("WALKTHROUGH_OUT", str(tmp_path))
    ns = {}
    for code in walkthrough:
        exec(compile(code, "docs/python.md", "exec"), ns)
    printed = capsys.readouterr().out
    assert "fa3            rotate" in printed
    paths = [c.path for c in ns["captures"]]
    assert len(paths) == 3
    got = ns["table"]()
    want = cli("heads", "--quiet", "--captures", *paths, "--kernel", "fa3,sage2pp-sm89", "--json", json_out=True)
    assert got == want
    assert [g["n_heads"] for g in got] == [40] * 6
    # The files are the CLI's, byte for byte (the CLI run into its own folder).
    cli("heads", "--quiet", "--captures", *paths, "--kernel", "fa3,sage2pp-sm89", "--out", tmp_path / "cli")
    for name in ("rows.csv", "heads.csv", "summary.json", "meta.json", "rows.jsonl", "heads.jsonl"):
        assert comparable(name, (tmp_path / "heads" / name).read_bytes()) == comparable(name, (tmp_path / "cli" / name).read_bytes()), name
    for name in ("rows.csv", "heads.csv"):
        assert (tmp_path / "tables" / name).read_bytes() == (tmp_path / "cli" / name).read_bytes(), name
