/*
 * service-auth profile editor: a dependency-free single page over the admin JSON API
 * (docs/contract.md §3), as ES modules with no build step. This entry module only starts it.
 *
 * editor-changes.js  staged credential changes and what `save` sends (pure; unit-tested)
 * editor-state.js    what the page knows, the admin token in sessionStorage, the hash route
 * editor-api.js      the JSON API and its errors in words
 * editor-dom.js      element building (text nodes only, never HTML), focus, live regions, copying
 * editor-dialog.js   the modal confirmation dialog
 * editor-secrets.js  new secrets: memory only, shown once
 * editor-router.js   which view the address shows, sign-out, failure reports
 * editor-keys.js     a pasted public key (key credentials)
 * editor-issuers.js  workload identity federation: issuer bodies, claim rows (pure; unit-tested)
 * editor-view-*.js   the views: profiles, editor, service, service settings, add forms, history,
 *                    key and federated credentials, admin tokens and trusted issuers (admins only;
 *                    what a token may do comes from GET /admin/session)
 */
import { start } from "./editor-router.js"

start()
