"""A node's inputs as rows: the relations its SQL names, landing files, Kafka topics, Debezium
events and JSON values (README.md lists every module)."""
