"""docs/python.md's walkthrough runs as written, in this process (no subprocess in it), and
reproduces `attnum heads` and `attnum loss` on the same stories260K captures and books byte for
byte (data/ in the repository; the books from Debian packages); the API section's five lines run
too."""
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
    # The loss step: the CLI's files, and the saved reference read back by the second kernel
    # gives the rows of a run that computes it.
    books = ns["books"]
    flags = ["--text", *books, "--tokens", "512", "--conditions", "plain,rotate"]
    cli("--quiet", "loss", "--model", "data/stories260K.bin", *flags, "--kernel", "fa3", "--out", tmp_path / "cli-loss")
    for name in ("loss.json", "loss.csv", "loss_paired.json", "loss_paired.csv"):
        assert (tmp_path / "loss" / name).read_bytes() == (tmp_path / "cli-loss" / name).read_bytes(), name
    sage = cli("--quiet", "loss", "--model", "data/stories260K.bin", *flags, "--kernel", "sage2pp-sm89", "--json",
               json_out=True)
    assert list(ns["sage"].rows["ppl_ratio"]) == [r["ppl_ratio"] for r in sage]
    assert "fa3            plain    ppl_ratio" in printed and "sage2pp-sm89   rotate   ppl_ratio" in printed
    # The one-call study: the README's study, whose head rows are the heads step's on the same captures.
    study = ns["study"]
    assert "report.html" in study.files
    assert [(s["kernel"], s["transform"], s["n_heads"]) for s in study.summary["heads"]] == \
        [(g["kernel"], g["transform"], 40) for g in got]
    assert "sage2pp-sm89   center+rotate   harmed" in printed
