{{ config(trigger='1 second') }}
-- Order events as they arrive on the topic, with their Kafka position.
select * from {{ source('kafka', 'orders') }}
