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
