"""Ships the project template inside the package, so `medallion init` works from any install.

The template's parts live once, at the repository root (the root is the sample project); the
build copies them into medallion_cli/template. Editable installs read them from the root.
"""

import json
import shutil
from pathlib import Path

from setuptools import setup
from setuptools.command.build_py import build_py

ROOT = Path(__file__).resolve().parent
SKELETON = ["cookiecutter.json", "hooks/*.py", "{{cookiecutter.project_slug}}/**/*"]


def template_files() -> list[Path]:
    examples = json.loads((ROOT / "cookiecutter.json").read_text())["_examples"]
    found = {path for pattern in SKELETON + examples for path in ROOT.glob(pattern)}
    return sorted(path for path in found if path.is_file() and "__pycache__" not in path.parts)


class BuildWithTemplate(build_py):
    def run(self):
        super().run()
        if getattr(self, "editable_mode", False):
            return
        target = Path(self.build_lib) / "medallion_cli" / "template"
        for path in template_files():
            dest = target / path.relative_to(ROOT)
            dest.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(path, dest)


setup(cmdclass={"build_py": BuildWithTemplate})
