#!/bin/sh
# make sdk-check: deliveries signed by the providers' own libraries (npm: standardwebhooks, svix,
# @octokit/webhooks-methods), received by the receiver's TestSDKSignedDeliveries. Skips, with status 0, without node
# and npm or when the packages cannot be installed (no network).
set -eu
if ! command -v node >/dev/null 2>&1 || ! command -v npm >/dev/null 2>&1; then
	echo "sdk-check: node or npm not found: skipped"
	exit 0
fi
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
cp scripts/sdk/sign.mjs "$dir/"
if ! (cd "$dir" && npm install --silent --no-audit --no-fund standardwebhooks@1 svix@1 @octokit/webhooks-methods@5 >/dev/null 2>&1); then
	echo "sdk-check: npm could not install the providers' libraries: skipped"
	exit 0
fi
(cd "$dir" && node sign.mjs >vectors.json)
DEDUPE_SDK_VECTORS="$dir/vectors.json" ${GO:-go} test -count=1 -run '^TestSDKSignedDeliveries$' -v ./receiver/
