-- A graph or pipeline node's result at rest (SECURITY.md: what a run writes that the API shows is
-- masked before it is stored). graph_nodes.output and .error hold the result masked with the run's
-- project secrets and credentials; when masking changed the output, the exact output is kept here,
-- sealed (core/src/seal.ts kind 'node-output', bound to the run and node id: base64 of the blob),
-- for the expressions of the nodes downstream (the graph driver opens it). Null when the output held
-- nothing to hide, and in rows written before this migration, whose output reads as it is.
alter table graph_nodes add column output_sealed text;
