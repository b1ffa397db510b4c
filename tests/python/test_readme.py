"""The README's Python example runs as written (numpy only).

Copyright 2026 The treemask Authors. SPDX-License-Identifier: Apache-2.0
"""
from conftest import SOURCE_ROOT


def test_readme_python_example_runs():
    """The first Python block of the README's "Python" section, verbatim."""
    readme = (SOURCE_ROOT / "README.md").read_text(encoding="utf-8")
    section = readme.split("\n## Python\n", 1)[1]
    code = section.split("```python\n", 1)[1].split("```", 1)[0]
    namespace = {}
    exec(compile(code, "README.md (Python example)", "exec"), namespace)
    assert namespace["matcher"].is_terminated() and len(namespace["matcher"].label_ids()) == 1


def test_readme_beam_search_example_finds_catalogue_items():
    """The Python block of the README's "Beam search" section, verbatim: it
    prints, per request, B distinct items of the catalogue, best first."""
    readme = (SOURCE_ROOT / "README.md").read_text(encoding="utf-8")
    section = readme.split("\n## Beam search\n", 1)[1]
    code = section.split("```python\n", 1)[1].split("```", 1)[0]
    namespace = {}
    exec(compile(code, "README.md (beam search example)", "exec"), namespace)
    items, B = namespace["items"], namespace["B"]
    for request in namespace["found"]:
        assert len(request) == B
        assert all(seq in items for seq, _ in request), request
        assert len({tuple(seq) for seq, _ in request}) == B
        scores = [score for _, score in request]
        assert scores == sorted(scores, reverse=True)
