-- A deliberately failing test, kept out of the default run, to show what a failure looks like:
--   medallion test -s failing_example --vars '{show_failing_example: true}'
{{ config(enabled=var('show_failing_example', false)) }}
select order_id, status from {{ ref('silver_orders') }} where status = 'placed'
