-- Pipeline runs have a workflow of their own (issue 11; spec "Versioning": `flowsvc/pipeline/v1`).
-- A pipeline run's `source` is the user's YAML; the graph document it compiled to, which the graph
-- driver runs, is `graph` (JSON text). A graph run (`flowsvc-graph/v1`) leaves `graph` null: its
-- source is the document. Readers take `coalesce(graph, source)` as the document the engine runs.
alter table runs add column graph text;
-- A pipeline's job-level concurrency groups (core's JobGroup list: job, nodes, group text, policy,
-- env), in document order; the i-th takes its lease at lock_leases position -2 - i.
alter table runs add column job_groups jsonb;

-- Pipeline runs made before this migration were stored as graph runs of a .yaml/.yml file (the
-- compiled JSON as their source): they become pipeline runs; `graph` stays null, so their engine
-- document is still their source.
update runs set workflow = 'flowsvc/pipeline/v1'
 where workflow = 'flowsvc-graph/v1' and filename ~ '[.]ya?ml$';
