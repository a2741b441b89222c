"""A corpus of mistakes analysts make in models, each one model under models/gold/, with what
the static checks say of it (file:line:column and the start of the message) and the error
class Spark's analyzer (or the contract check on its rows) refuses it with. The base models
are correct: neither the checks nor Spark may refuse them. Used by test_static_checks.py (the
checks, no JVM) and test_static_check_corpus.py (the same models built by Spark)."""

from __future__ import annotations

from dataclasses import dataclass

SOURCES = """\
sources:
  - name: landing
    path: landing
    tables:
      - name: orders
        format: json
        schema: "order_id bigint, customer_id bigint, amount decimal(10,2), status string,
          ordered_at timestamp, is_gift boolean, items array<struct<sku:string,qty:int>>,
          attrs map<string,string>"
"""
SEED_TYPES = """\
seeds:
  - name: customers
    config:
      column_types: {customer_id: bigint, name: string, signed_up: date}
"""
CONTRACT = """\
models:
  - name: contract_missing
    config: {contract: {enforced: true}}
    columns:
      - {name: order_id, data_type: bigint}
      - {name: total, data_type: "decimal(10,2)"}
  - name: contract_type
    config: {contract: {enforced: true}}
    columns:
      - {name: order_id, data_type: bigint}
      - {name: day, data_type: date}
  - name: contract_extra
    config: {contract: {enforced: true}}
    columns:
      - {name: order_id, data_type: bigint}
"""
ORDER = {"order_id": 1, "customer_id": 1, "amount": 12.5, "status": "paid",
         "ordered_at": "2026-01-02T10:00:00", "is_gift": False,
         "items": [{"sku": "A", "qty": 2}], "attrs": {"channel": "web"}}

# Correct models, of the constructs the mistakes below get wrong
BASE = {
    "models/sources.yml": SOURCES,
    "seeds/customers.csv": "customer_id,name,signed_up\n1,Ada,2024-01-02\n2,Bo,2024-02-03\n",
    "seeds/properties.yml": SEED_TYPES,
    "models/gold/contracts.yml": CONTRACT,
    "models/silver/orders.sql": """\
        select order_id, customer_id, amount, lower(status) as status, ordered_at, is_gift,
               items, attrs, to_date(ordered_at) as order_day
        from {{ source('landing', 'orders') }}""",
    "models/gold/by_customer.sql": """\
        with paid as (
            select * from {{ ref('orders') }} where status = 'paid' and not is_gift
        )
        select c.customer_id, c.name, count(*) as orders, sum(p.amount) as revenue,
               max(p.order_day) as last_day, count_if(p.amount > 10) as big,
               datediff(max(p.order_day), min(c.signed_up)) as days_active
        from paid as p
        join {{ ref('customers') }} as c on c.customer_id = p.customer_id
        where p.ordered_at >= '2020-01-01' and c.signed_up < current_date()
        group by c.customer_id, c.name
        having count(*) > 0""",
    "models/gold/by_status.sql": """\
        select upper(status) as status, order_day, sum(amount) as revenue,
               rank() over (partition by order_day order by sum(amount) desc) as place,
               attrs['channel'] as channel
        from {{ ref('orders') }}
        group by 1, order_day, attrs['channel']""",
    "models/gold/lines.sql": """\
        select o.order_id, item.sku, item.qty, o.items[0].sku as first_sku,
               size(o.items) as n_items, element_at(o.attrs, 'channel') as channel
        from {{ ref('orders') }} as o
        lateral view explode(o.items) exploded as item
        where o.order_id in (select customer_id from {{ ref('customers') }})
        union all
        select order_id, 'none', 0, null, 0, null from {{ ref('orders') }}
        where size(items) = 0""",
    "models/gold/shapes.sql": """\
        select case when amount > 100 then 'big' else 'small' end as size,
               date_trunc('month', ordered_at) as month, count(distinct customer_id) as buyers,
               sum(sum(amount)) over (order by date_trunc('month', ordered_at)) as running,
               collect_list(struct(order_id, amount)) as orders,
               max(filter(items, i -> i.qty > 1)) as many,
               any_value(transform(items, i -> i.sku)) as skus,
               percentile_approx(amount, 0.5) as median,
               coalesce(max(attrs['channel']), 'none') as channel
        from {{ ref('orders') }}
        where order_day >= '2024-01-01' and is_gift = false and amount > 1.5d
          and ordered_at between '2024-01-01' and current_timestamp() - interval 1 day
        group by case when amount > 100 then 'big' else 'small' end,
                 date_trunc('month', ordered_at)
        having buyers > 0
        order by month, size""",
    "models/gold/wide.sql": """\
        {{ config(materialized='incremental', strategy='append') }}
        select o.*, c.name, c.signed_up, explode(o.items) as item
        from {{ ref('orders') }} as o
        left join {{ ref('customers') }} as c using (customer_id)
        {% if is_incremental() %}
        where o.ordered_at > (select max(ordered_at) from {{ this }})
        {% endif %}""",
    "models/gold/both_ways.sql": """\
        select * from {{ ref('customers') }}
        union all
        select customer_id, name, signed_up from {{ ref('customers') }}
        union
        select customer_id, upper(name), signed_up from {{ ref('customers') }}""",
    "models/gold/hinted.sql": """\
        select /*+ REPARTITION(2), REBALANCE(order_id), BROADCAST(c) */ o.order_id, c.name
        from {{ ref('orders') }} as o
        join {{ ref('customers') }} as c on c.customer_id = o.customer_id""",
    "models/gold/contract_ok.sql": """\
        select order_id, cast(sum(amount) as decimal(10,2)) as total
        from {{ ref('orders') }} group by order_id""",
}
BASE["models/gold/contracts.yml"] += """\
  - name: contract_ok
    config: {contract: {enforced: true}}
    columns:
      - {name: order_id, data_type: bigint}
      - {name: total, data_type: "decimal(10,2)"}
"""


@dataclass(frozen=True)
class Mistake:
    name: str  # the model, models/gold/<name>.sql
    sql: str
    said: str  # the static check's finding starts so, after `models/gold/<name>.sql:`
    spark: str  # what Spark's refusal (or the contract check's) says


MISTAKES = [
    # columns that do not exist, misspelled, or on the wrong relation
    Mistake("typo_select", "select order_id, amont\nfrom {{ ref('orders') }}",
            "1:18: unknown column 'amont'; did you mean 'amount'?", "UNRESOLVED_COLUMN"),
    Mistake("typo_where", "select order_id from {{ ref('orders') }}\nwhere stauts = 'paid'",
            "2:7: unknown column 'stauts'; did you mean 'status'", "UNRESOLVED_COLUMN"),
    Mistake("typo_join", "select o.order_id from {{ ref('orders') }} as o\n"
            "join {{ ref('customers') }} as c on c.customer_ud = o.customer_id",
            "2:39: 'c' (customers) has no column 'customer_ud'; did you mean 'customer_id'?",
            "UNRESOLVED_COLUMN"),
    Mistake("typo_group_by", "select status, count(*) as n from {{ ref('orders') }}\n"
            "group by statu", "2:10: unknown column 'statu'; did you mean 'status'", 
            "UNRESOLVED_COLUMN"),
    Mistake("typo_order_by", "select order_id from {{ ref('orders') }}\norder by ordered",
            "2:10: unknown column 'ordered'; did you mean 'ordered_at'", "UNRESOLVED_COLUMN"),
    Mistake("wrong_alias", "select x.order_id from {{ ref('orders') }} as o",
            "1:10: no relation 'x' with a column 'order_id' in scope", "UNRESOLVED_COLUMN"),
    Mistake("column_of_other_table", "select o.name from {{ ref('orders') }} as o\n"
            "join {{ ref('customers') }} as c on c.customer_id = o.customer_id",
            "1:10: 'o' (orders) has no column 'name'; c.name has it", "UNRESOLVED_COLUMN"),
    Mistake("ambiguous", "select customer_id from {{ ref('orders') }} as o\n"
            "join {{ ref('customers') }} as c on c.customer_id = o.customer_id",
            "1:8: column 'customer_id' is ambiguous", "AMBIGUOUS_REFERENCE"),
    Mistake("typo_in_cte", "with paid as (\n  select order_id, amout from {{ ref('orders') }}\n)"
            "\nselect * from paid", "2:20: unknown column 'amout'; did you mean 'amount'?",
            "UNRESOLVED_COLUMN"),
    Mistake("cte_column_not_selected", "with paid as (\n  select order_id from {{ ref('orders') }}"
            "\n)\nselect order_id, amount from paid",
            "4:18: unknown column 'amount'", "UNRESOLVED_COLUMN"),
    Mistake("typo_in_subquery", "select order_id from {{ ref('orders') }}\n"
            "where customer_id in (select customer from {{ ref('customers') }})",
            "2:30: unknown column 'customer'; did you mean 'customer_id'?", "UNRESOLVED_COLUMN"),
    Mistake("typo_in_window", "select order_id,\n  row_number() over (partition by custmer_id "
            "order by ordered_at) as n\nfrom {{ ref('orders') }}",
            "2:35: unknown column 'custmer_id'; did you mean 'customer_id'",
            "UNRESOLVED_COLUMN"),
    Mistake("typo_seed_column", "select customer_id, sign_up from {{ ref('customers') }}",
            "1:21: unknown column 'sign_up'; did you mean 'signed_up'?", "UNRESOLVED_COLUMN"),
    Mistake("typo_derived_column", "select order_id, orderday from {{ ref('orders') }}",
            "1:18: unknown column 'orderday'; did you mean 'order_day'", "UNRESOLVED_COLUMN"),
    Mistake("typo_in_having", "select status, count(*) as n from {{ ref('orders') }}\n"
            "group by status\nhaving count(*) > 1 and statsu <> 'x'",
            "3:25: unknown column 'statsu'; did you mean 'status'", "UNRESOLVED_COLUMN"),
    Mistake("window_alias_in_having", "select status, count(*) as n,\n"
            "  rank() over (order by count(*)) as place\nfrom {{ ref('orders') }}\n"
            "group by status\nhaving place = 1", "5:1: 'place' is a window function's result",
            "UNRESOLVED_COLUMN"),
    # group by
    Mistake("not_grouped", "select status, order_day, count(*) as n\nfrom {{ ref('orders') }}\n"
            "group by status", "1:16: column 'order_day' is neither in the group by nor "
            "aggregated", "MISSING_AGGREGATION"),
    Mistake("aggregate_without_group_by", "select status, sum(amount) as revenue\n"
            "from {{ ref('orders') }}", "1:8: column 'status' is selected beside an aggregate "
            "with no group by", "MISSING_GROUP_BY"),
    Mistake("grouped_by_ordinal_only", "select status, order_day, count(*) as n\n"
            "from {{ ref('orders') }}\ngroup by 1", "1:16: column 'order_day' is neither in "
            "the group by nor aggregated", "MISSING_AGGREGATION"),
    Mistake("grouped_expression_not_column", "select status, count(*) as n\n"
            "from {{ ref('orders') }}\ngroup by upper(status)", "1:8: column 'status' is "
            "neither in the group by nor aggregated", "MISSING_AGGREGATION"),
    Mistake("not_grouped_in_cte", "with daily as (\n  select order_day, status, sum(amount) as r"
            "\n  from {{ ref('orders') }} group by order_day\n)\nselect * from daily",
            "2:21: column 'status' is neither in the group by nor aggregated",
            "MISSING_AGGREGATION"),
    # set operations of different widths
    Mistake("union_all_widths", "select order_id, status from {{ ref('orders') }}\nunion all\n"
            "select customer_id from {{ ref('customers') }}",
            "the two sides of this union have 2 and 1 columns", "NUM_COLUMNS_MISMATCH"),
    Mistake("union_widths", "select order_id from {{ ref('orders') }}\nunion\n"
            "select customer_id, name from {{ ref('customers') }}",
            "the two sides of this union have 1 and 2 columns", "NUM_COLUMNS_MISMATCH"),
    Mistake("except_widths", "select order_id, customer_id from {{ ref('orders') }}\nexcept\n"
            "select customer_id from {{ ref('customers') }}",
            "the two sides of this except have 2 and 1 columns", "NUM_COLUMNS_MISMATCH"),
    Mistake("intersect_widths", "select customer_id from {{ ref('orders') }}\nintersect\n"
            "select customer_id, name from {{ ref('customers') }}",
            "the two sides of this intersect have 1 and 2 columns", "NUM_COLUMNS_MISMATCH"),
    # functions Spark does not have
    Mistake("typo_function", "select order_id, cout(amount) as n\nfrom {{ ref('orders') }}\n"
            "group by order_id", "1:18: unknown function 'cout'; did you mean", 
            "UNRESOLVED_ROUTINE"),
    Mistake("other_dialects_function", "select order_id, getdate() as now\n"
            "from {{ ref('orders') }}", "1:18: unknown function 'getdate'", 
            "UNRESOLVED_ROUTINE"),
    Mistake("snowflake_iff", "select order_id, iff(amount > 10, 'big', 'small') as size\n"
            "from {{ ref('orders') }}", "1:18: unknown function 'iff'; did you mean 'if'",
            "UNRESOLVED_ROUTINE"),
    Mistake("duckdb_strftime", "select strftime(ordered_at, '%Y') as y from {{ ref('orders') }}",
            "1:8: unknown function 'strftime'", "UNRESOLVED_ROUTINE"),
    Mistake("typo_function_in_where", "select order_id from {{ ref('orders') }}\n"
            "where lenght(status) > 3", "2:7: unknown function 'lenght'; did you mean 'length'",
            "UNRESOLVED_ROUTINE"),
    # comparisons Spark cannot make
    Mistake("date_vs_number", "select order_id from {{ ref('orders') }}\n"
            "where order_day > order_id", "2:7: 'order_day' (date) and 'order_id' (bigint) "
            "cannot be compared", "DATATYPE_MISMATCH"),
    Mistake("join_timestamp_on_number", "select o.order_id from {{ ref('orders') }} as o\n"
            "join {{ ref('customers') }} as c on o.ordered_at = c.customer_id",
            "2:39: 'o.ordered_at' (timestamp) and 'c.customer_id' (bigint) cannot be compared",
            "DATATYPE_MISMATCH"),
    Mistake("boolean_vs_number", "select order_id from {{ ref('orders') }}\nwhere is_gift = 1",
            "2:7: 'is_gift' (boolean) and '1' (int) cannot be compared", "DATATYPE_MISMATCH"),
    Mistake("array_vs_string", "select order_id from {{ ref('orders') }}\nwhere items = 'A'",
            "2:7: 'items' (array<struct<sku: string, qty: int>>) and ''A'' (string) cannot "
            "be compared", "DATATYPE_MISMATCH"),
    Mistake("map_vs_map", "select a.order_id from {{ ref('orders') }} as a\n"
            "join {{ ref('orders') }} as b on a.attrs = b.attrs",
            "2:36: 'a.attrs' (map<string, string>) and 'b.attrs' (map<string, string>) cannot "
            "be compared", "DATATYPE_MISMATCH"),
    # contracts the SELECT cannot meet
    Mistake("contract_missing", "select order_id, sum(amount) as totl\nfrom {{ ref('orders') }}\n"
            "group by order_id", "the contract in models/gold/contracts.yml declares column "
            "'total', which the SELECT does not give", "contract"),
    Mistake("contract_type", "select order_id, cast(ordered_at as string) as day\n"
            "from {{ ref('orders') }}", "1:48: column 'day' is string, the contract in "
            "models/gold/contracts.yml says date", "contract"),
    Mistake("contract_extra", "select order_id, status\nfrom {{ ref('orders') }}",
            "1:18: column 'status' is not in the contract in models/gold/contracts.yml",
            "contract"),
]


def corpus_files() -> dict[str, str]:
    """The base project and every mistake, each a model of its own."""
    return {**BASE, **{f"models/gold/{m.name}.sql": m.sql for m in MISTAKES}}
