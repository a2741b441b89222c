"""The sample project's own model tests, written with the pytest fixtures medallion ships
(`run_model`, `spark`) and chispa: the way a project tests its SQL on small fixtures."""

import datetime as dt
from decimal import Decimal

from chispa import assert_df_equality


def test_daily_revenue_excludes_cancelled_orders(run_model, spark):
    lines = [
        {"order_id": 1, "customer_id": 1, "status": "placed", "order_date": "2024-05-01",
         "category": "coffee", "amount": 10.5},
        {"order_id": 2, "customer_id": 2, "status": "cancelled", "order_date": "2024-05-01",
         "category": "coffee", "amount": 99.0},
        {"order_id": 3, "customer_id": 1, "status": "shipped", "order_date": "2024-05-01",
         "category": "coffee", "amount": 4.5},
    ]
    out = run_model("gold_daily_revenue", {
        "ref('gold_order_lines')": spark.createDataFrame(
            [(r["order_id"], r["customer_id"], r["status"], dt.date.fromisoformat(r["order_date"]),
              r["category"], Decimal(str(r["amount"]))) for r in lines],
            "order_id long, customer_id long, status string, order_date date, category string, "
            "amount decimal(12,2)")})
    expected = spark.createDataFrame(
        [(dt.date(2024, 5, 1), "coffee", 2, Decimal("15.00"), "EUR")],
        "order_date date, category string, orders long, revenue decimal(12,2), currency string")
    assert_df_equality(out, expected, ignore_nullable=True)


def test_silver_customers_keeps_history(run_model):
    rows = run_model("silver_customers", {"ref('bronze_customers')": [
        {"customer_id": 1, "name": "Ada", "email": "ADA@x.org", "country": "GB",
         "updated_at": "2024-05-01T08:00:00Z", "_corrupt_record": None},
        {"customer_id": 1, "name": "Ada", "email": "ada@y.org", "country": "GB",
         "updated_at": "2024-05-02T08:00:00Z", "_corrupt_record": None},
    ]}).orderBy("valid_from").collect()
    assert [(r.email, r.is_current) for r in rows] == [("ada@x.org", False), ("ada@y.org", True)]
