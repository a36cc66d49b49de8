#!/bin/sh
# Deploy on GitHub push, at most once per commit, never back to an older
# one. hookbox runs this with the push payload on stdin (exec target). The
# deployed SHA is the business key: a redelivery, or a second push of the
# same commit, finds it and exits 0; a commit deployed before the current
# one is refused.
set -eu
state=${DEPLOY_DIR:-.}
sha=$(grep -o '"after": *"[0-9a-f]\{40\}"' | grep -o '[0-9a-f]\{40\}' || true)
if [ -z "$sha" ]; then
    echo "push without an 'after' commit; nothing to deploy"
    exit 0
fi
if [ "$(cat "$state/deployed_sha" 2>/dev/null || true)" = "$sha" ]; then
    echo "$sha is already deployed (delivery $HOOKBOX_DELIVERY_ID)"
    exit 0
fi
# Never roll back: a commit deployed before the current one is older than
# it, and a push carrying it (a late delivery, or a captured push sent
# again) must not put it back. Exit 0: there is nothing to retry.
if grep -qx "$sha" "$state/deploys.log" 2>/dev/null; then
    echo "refusing $sha: older than the deployed $(cat "$state/deployed_sha") (delivery $HOOKBOX_DELIVERY_ID)"
    exit 0
fi
# The real deployment goes here (build, copy, restart). It must be safe to
# repeat: a crash after it and before the next line runs it again.
echo "$sha" >> "$state/deploys.log"
echo "$sha" > "$state/deployed_sha.tmp" && mv "$state/deployed_sha.tmp" "$state/deployed_sha"
echo "deployed $sha"
