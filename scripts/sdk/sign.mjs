// Signs webhook deliveries with the providers' own libraries and prints them as JSON, for the receiver's
// TestSDKSignedDeliveries (make sdk-check). The secrets are the test's: see receiver/sdk_test.go.
import { createRequire } from "node:module";
import { sign as githubSign } from "@octokit/webhooks-methods";

const require = createRequire(import.meta.url);
const { Webhook: StandardWebhook } = require("standardwebhooks");
const { Webhook: SvixWebhook } = require("svix");

const swSecret = "whsec_c3RhbmRhcmQtd2ViaG9va3Mta2V5LTQ0YjA=";
const ghSecret = "gh-sdk-secret-5e1f";
const now = new Date();
const ts = String(Math.floor(now.getTime() / 1000));
const out = [];

const body = JSON.stringify({ type: "invoice.paid", data: { id: "in_sdk" } });
const sw = new StandardWebhook(swSecret).sign("msg_sdk_sw", now, body);
out.push({ name: "standardwebhooks", source: "standard_webhooks", id: "msg_sdk_sw", body,
  headers: { "webhook-id": "msg_sdk_sw", "webhook-timestamp": ts, "webhook-signature": sw } });

const svixSig = new SvixWebhook(swSecret).sign("msg_sdk_svix", now, body);
out.push({ name: "svix, svix-* names", source: "svix", id: "msg_sdk_svix", body,
  headers: { "svix-id": "msg_sdk_svix", "svix-timestamp": ts, "svix-signature": svixSig } });
const svixUnbranded = new SvixWebhook(swSecret).sign("msg_sdk_wh", now, body);
out.push({ name: "svix, unbranded webhook-* names", source: "svix", id: "msg_sdk_wh", body,
  headers: { "webhook-id": "msg_sdk_wh", "webhook-timestamp": ts, "webhook-signature": svixUnbranded } });

const ghBody = JSON.stringify({ action: "opened", number: 1347 });
out.push({ name: "octokit", source: "github", id: "72d3162e-sdk", body: ghBody,
  headers: { "x-github-delivery": "72d3162e-sdk", "x-hub-signature-256": await githubSign(ghSecret, ghBody) } });

process.stdout.write(JSON.stringify(out) + "\n");
