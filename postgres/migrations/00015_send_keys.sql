-- +goose Up
-- effect.RecordSend remembers each send by a key in effect_keys (scope
-- "send:<kind>", which is the send's source), a table retention never
-- purges. A send recorded before that has only its event row, which a
-- purge deletes once the send is done: give each its key now, so that no
-- later RecordSend for the same key can perform it again. The range on
-- source reads the (source, delivery_id) index, not the table.
INSERT INTO effect_keys (scope, key, event_id)
SELECT source, delivery_id, id FROM event_data
WHERE source >= 'send:' AND source < 'send;'
ON CONFLICT DO NOTHING;

-- +goose Down
-- The keys stay: RecordSend reads them, and an older hookbox ignores them.
SELECT 1;
