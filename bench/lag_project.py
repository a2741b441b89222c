"""A project of many models with target lags only, for timing `medallion plan` (issue 91 asks
for 200 models in under 2 s with no JVM):

    python bench/lag_project.py /tmp/lags --models 200
    farm-bench -n 5 -- medallion plan --project-dir /tmp/lags --vs 'medallion ls --project-dir /tmp/lags'

A quarter of the models are bronze (a landing feed each, streamed), a quarter silver (a merge
stream over one bronze), half gold (an aggregate over a silver joined to an earlier gold's
lookup, refreshed per group; golds form a tree of depth log2 of their count). `medallion ls` renders the same project without planning, so the
ratio is what choosing and explaining the modes adds.
"""

from __future__ import annotations

import argparse
from pathlib import Path

PROFILE = """\
lags:
  target: local
  outputs:
    local:
      engine: embedded
      warehouse: warehouse
"""


def write(root: Path, models: int) -> None:
    feeds = max(1, models // 4)
    files = {
        "medallion_project.yml": "name: lags\nprofile: lags\nmodels:\n"
                                 "  bronze: {target_lag: 10 seconds, strategy: append}\n"
                                 "  silver: {target_lag: downstream, strategy: merge}\n"
                                 "  gold: {target_lag: 5 minutes}\n",
        "profiles/profiles.yml": PROFILE,
        "models/sources.yml": "sources:\n  - name: landing\n    path: landing\n    tables:\n"
        + "".join(f"      - name: feed{i}\n        format: json\n        schema: \"id bigint, "
                  "customer bigint, amount double, at timestamp\"\n" for i in range(feeds)),
    }
    for i in range(feeds):
        files[f"models/bronze/bronze{i}.sql"] = (
            f"select *, current_timestamp() as _loaded_at from {{{{ source('landing', 'feed{i}') }}}}")
        files[f"models/silver/silver{i}.sql"] = (
            "{{ config(unique_key='id', sequence_by='at') }}\n"
            f"select id, customer, amount, at from {{{{ ref('bronze{i}') }}}} where amount > 0")
    for i in range(models - 2 * feeds):
        lookup = f"\njoin {{{{ ref('gold{i // 2}') }}}} as g using (customer)" if i else ""
        files[f"models/gold/gold{i}.sql"] = (
            "{{ config(incremental_by='customer') }}\n"
            f"select s.customer, sum(s.amount) as amount\nfrom {{{{ ref('silver{i % feeds}') }}}}"
            f" as s{lookup}\ngroup by s.customer")
    for i in range(feeds):
        (root / f"landing/feed{i}").mkdir(parents=True, exist_ok=True)
    for path, text in files.items():
        (root / path).parent.mkdir(parents=True, exist_ok=True)
        (root / path).write_text(text + "\n")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("root", type=Path)
    parser.add_argument("--models", type=int, default=200)
    args = parser.parse_args()
    write(args.root, args.models)
    print(f"{args.models} models in {args.root}")


if __name__ == "__main__":
    main()
