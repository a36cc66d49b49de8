-- +goose Up
-- effect.RecordSend remembers each send by a key in effect_keys (scope
-- "send:<kind>", which is the send's source), a table retention never
-- purges. A send recorded before that has only its event row, which a
-- purge deletes once the send is done: give each its key now, so that no
-- later RecordSend for the same key can perform it again.
--
-- The sources are found by a walk over the (source, delivery_id) index,
-- one step per distinct source, and the send sources' rows through the
-- same index: no scan of the table, and no range on source, whose order
-- is the database's collation (under ICU's en-US ';' sorts before ':', so
-- a range from 'send:' to 'send;' held nothing).
WITH RECURSIVE sources (source) AS (
    (SELECT source FROM event_data ORDER BY source LIMIT 1)
    UNION ALL
    SELECT (SELECT e.source FROM event_data e WHERE e.source > s.source ORDER BY e.source LIMIT 1)
    FROM sources s WHERE s.source IS NOT NULL
)
INSERT INTO effect_keys (scope, key, event_id)
SELECT source, delivery_id, id FROM event_data
WHERE source IN (SELECT source FROM sources WHERE starts_with(source, 'send:'))
ON CONFLICT DO NOTHING;

-- +goose Down
-- The keys stay: RecordSend reads them, and an older hookbox ignores them.
SELECT 1;
