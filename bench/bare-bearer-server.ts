/**
 * Reference for `npm run bench`: the least a protected JSON service can do on node:http with jose.
 * It checks the call as `bare-bearer-check.ts` says (a Bearer token verified against the JWKS of
 * the service-auth under test), reads the JSON body and echoes it as service-auth's echo handler
 * does. No framework, no revocation check, no cache of verified tokens.
 *
 *   PORT BARE_JWKS_URL   npx tsx bench/bare-bearer-server.ts
 */
import { createServer } from "node:http"
import { answer, checkCall, loadJwks, readJson } from "./bare-bearer-check.js"

const port = Number(process.env.PORT)
const jwks = await loadJwks()

const server = createServer(async (request, response) => {
  const call = await checkCall(request, response, jwks)
  if (call === undefined) return
  readJson(request, response, (body) => {
    const { uuid, profile, environment, claims } = call
    answer(response, 200, { service_uuid: uuid, profile, environment, client_id: claims.client_id, body })
  })
})
server.listen(port, "127.0.0.1", () => console.log(`listening ${port}`))
