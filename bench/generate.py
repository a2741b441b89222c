"""Generate the sample project's e-commerce feed at any size.

Writes landing/orders/*.json (order events: inserts, later updates, deletes, and some late
updates older than the current state), landing/customers/*.csv (snapshots, some customers
changing) and landing/events/*.json (clickstream sessions: views, carts, purchases, with some
duplicate deliveries), in the shape the sample models read. Product ids come from
seeds/products.csv.

    python bench/generate.py --dest /tmp/feed --orders 100000 --files 20
"""

from __future__ import annotations

import argparse
import csv
import datetime as dt
import json
import random
from pathlib import Path

PRODUCTS = ["P-100", "P-101", "P-200", "P-201", "P-300"]
COUNTRIES = ["GB", "US", "NL", "DE", "FR"]
START = dt.datetime(2024, 5, 1, tzinfo=dt.timezone.utc)


def _stamp(t: dt.datetime) -> str:
    return t.strftime("%Y-%m-%dT%H:%M:%SZ")


def order_events(orders: int, rng: random.Random, first_id: int = 1):
    """Events in landing order: each order is placed, some are updated, deleted or get a late,
    older update. Returns (landing position, event) pairs."""
    events = []
    customers = max(1, orders // 10)
    for i in range(orders):
        order_id = first_id + i
        placed = START + dt.timedelta(seconds=30 * i)
        base = {"order_id": order_id, "customer_id": rng.randint(1, customers),
                "product_id": rng.choice(PRODUCTS), "quantity": rng.randint(1, 5)}
        events.append((i, {**base, "status": "placed", "op": "I", "updated_at": _stamp(placed)}))
        roll = rng.random()
        later = i + rng.randint(1, max(1, orders // 4))
        if roll < 0.30:
            events.append((later, {**base, "status": "shipped", "op": "U",
                                   "updated_at": _stamp(placed + dt.timedelta(days=1))}))
        elif roll < 0.35:
            events.append((later, {**base, "status": "placed", "op": "D",
                                   "updated_at": _stamp(placed + dt.timedelta(days=2))}))
        elif roll < 0.37:  # arrives late, but is older than the order's insert
            events.append((later, {**base, "status": "cancelled", "op": "U",
                                   "updated_at": _stamp(placed - dt.timedelta(hours=1))}))
    events.sort(key=lambda pair: pair[0])
    return [e for _, e in events]


def click_events(sessions: int, customers: int, rng: random.Random):
    """Sessions that view a product, some add it to the cart, some buy; ~1% delivered twice."""
    events = []
    for s in range(sessions):
        start = START + dt.timedelta(seconds=45 * s)
        customer = rng.randint(1, customers) if rng.random() < 0.8 else None
        product = rng.choice(PRODUCTS)
        steps = ["page_view"] + (["add_to_cart"] if rng.random() < 0.4 else [])
        steps += ["purchase"] if rng.random() < 0.25 else []
        for i, step in enumerate(steps):
            event = {"event_id": f"e-{s}-{i}", "session_id": f"s-{s}", "customer_id": customer,
                     "event_type": step, "product_id": product,
                     "event_at": _stamp(start + dt.timedelta(minutes=2 * i))}
            events.append(event)
            if rng.random() < 0.01:
                events.append(event)
    return events


def _write_json_lines(folder: Path, prefix: str, events: list, files: int) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    per_file = -(-len(events) // files)
    for n in range(files):
        with (folder / f"{prefix}_{n:05d}.json").open("w") as out:
            out.writelines(json.dumps(e) + "\n" for e in events[n * per_file:(n + 1) * per_file])


def generate(dest: Path, orders: int, files: int, seed: int = 7) -> dict:
    rng = random.Random(seed)
    customer_dir = dest / "customers"
    customer_dir.mkdir(parents=True, exist_ok=True)
    events = order_events(orders, rng)
    _write_json_lines(dest / "orders", "orders", events, files)
    customers = max(1, orders // 10)
    with (customer_dir / "customers_00000.csv").open("w", newline="") as out:
        writer = csv.writer(out)
        writer.writerow(["customer_id", "name", "email", "country", "updated_at"])
        for c in range(1, customers + 1):
            writer.writerow([c, f"Customer {c}", f"c{c}@example.com", rng.choice(COUNTRIES),
                             _stamp(START)])
        for c in rng.sample(range(1, customers + 1), k=customers // 10):
            writer.writerow([c, f"Customer {c}", f"c{c}@example.org", rng.choice(COUNTRIES),
                             _stamp(START + dt.timedelta(days=3))])
    clicks = click_events(orders, customers, rng)
    _write_json_lines(dest / "events", "events", clicks, files)
    return {"order_events": len(events), "customers": customers, "click_events": len(clicks),
            "files": files}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dest", type=Path, required=True, help="the landing folder to fill")
    parser.add_argument("--orders", type=int, default=10000)
    parser.add_argument("--files", type=int, default=10)
    parser.add_argument("--seed", type=int, default=7)
    args = parser.parse_args()
    print(generate(args.dest, args.orders, args.files, args.seed))


if __name__ == "__main__":
    main()
