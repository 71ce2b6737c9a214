/**
 * The proxy scenarios of `npm run bench` (run after `bench/run.ts`'s, or alone with
 * `npx tsx bench/proxy.ts`): calls of a `proxy` service through service-auth against
 * `bare-proxy-server.ts` (node:http + jose), each in front of the same local upstream
 * (`upstream-server.ts`). service-auth runs three ways on the same data: traces off, traces exported
 * with 10% of new traces sampled (`parentbased_traceidratio`, 0.1), and every request sampled
 * (`always_on`), spans going to a local OTLP sink. Rounds alternate which side goes first, and the
 * report gives the median per-round ratio, as `run.ts` does.
 */
import * as Jose from "jose"
import { rmSync } from "node:fs"
import { cpus } from "node:os"
import {
  admin,
  CONNECTIONS,
  dataDir,
  describeDatabase,
  fmt,
  HEADER,
  line,
  load,
  type Measurement,
  median,
  ROUNDS,
  row,
  type Running,
  running,
  SECONDS,
  send,
  serviceCallOf,
  startBare,
  startServiceAuth,
  stop,
  summarise,
  tokenRequestOf,
  warmUp
} from "./run.js"

const VARIANTS = [
  { name: "proxy calls", env: {} },
  {
    name: "proxy, 10% traced",
    env: { OTEL_TRACES_SAMPLER: "parentbased_traceidratio", OTEL_TRACES_SAMPLER_ARG: "0.1" }
  },
  { name: "proxy, all traced", env: { OTEL_TRACES_SAMPLER: "always_on" } }
] as const

const main = async () => {
  try {
    const upstream = await startBare("upstream-server.ts", {})
    const upstreamUrl = `${upstream.base}/echo`
    const sink = await startBare("otlp-sink.ts", {})
    // The batch processor's schedule is service-auth's own default (a batch a second).
    const otlp = { OTEL_EXPORTER_OTLP_ENDPOINT: sink.base }

    // The catalogue, made once on the first start; later starts use the same data.
    let { server: ours } = await startServiceAuth(dataDir)
    const profile = `bench-${crypto.randomUUID().slice(0, 8)}`
    await admin(ours.base, "PUT", `/admin/profiles/${profile}`)
    await admin(ours.base, "PUT", `/admin/profiles/${profile}/environments/production`)
    const service = await admin(ours.base, "POST", `/admin/profiles/${profile}/environments/production/services`, {
      name: "bench-proxy",
      auth_type: "oauth",
      handler: { type: "proxy", url: upstreamUrl }
    })
    const credential = await admin(
      ours.base,
      "POST",
      `/admin/profiles/${profile}/environments/production/services/${service.uuid}/credentials`
    )
    const token = String((await send(ours, tokenRequestOf(credential, profile, "production", service.uuid))).access_token)
    const call = serviceCallOf(token, profile, "production", service.uuid)
    // The bare proxy's own key and token, with the least a token needs (see bare-proxy-server.ts).
    const bareKey = await Jose.generateKeyPair("RS256", { extractable: true })
    const bareJwk = { ...(await Jose.exportJWK(bareKey.publicKey)), kid: "bare", alg: "RS256", use: "sig" }
    const bareToken = await new Jose.SignJWT({ scope: "service:call" })
      .setProtectedHeader({ alg: "RS256", typ: "JWT", kid: "bare" })
      .setIssuedAt()
      .setExpirationTime("1h")
      .sign(bareKey.privateKey)
    const bareCall = serviceCallOf(bareToken, profile, "production", service.uuid)
    const bare = await startBare("bare-proxy-server.ts", {
      BARE_JWKS: JSON.stringify({ keys: [bareJwk] }),
      BARE_UPSTREAM_URL: upstreamUrl
    })
    const ourAnswer = JSON.stringify(await send(ours, call))
    const bareAnswer = JSON.stringify(await send(bare, bareCall))
    if (ourAnswer !== bareAnswer) console.error(`!! proxy answers differ:\n  service-auth ${ourAnswer}\n  bare ${bareAnswer}`)

    console.log(
      `service-auth proxy bench: ${describeDatabase()}; ${CONNECTIONS} connections, ${SECONDS} s per run, ` +
        `${ROUNDS} round${ROUNDS === 1 ? "" : "s"}; ${cpus().length} cores, node ${process.version}`
    )
    console.log("")
    console.log(HEADER)
    const summaries: Array<{ name: string; ours: Measurement; bare: Measurement; ratio: number }> = []
    for (const [v, variant] of VARIANTS.entries()) {
      if (v > 0) {
        await stop(ours)
        ours = (await startServiceAuth(dataDir, { ...otlp, ...variant.env })).server
        await send(ours, call)
      }
      await warmUp(ours, call)
      if (v === 0) await warmUp(bare, bareCall)
      const results = { ours: [] as Array<Measurement>, bare: [] as Array<Measurement> }
      for (let round = 1; round <= ROUNDS; round++) {
        const order = round % 2 === 1 ? (["ours", "bare"] as const) : (["bare", "ours"] as const)
        for (const who of order) {
          const server: Running = who === "ours" ? ours : bare
          const measured = await load(server, who === "ours" ? call : bareCall)
          results[who].push(measured)
          console.log(line(`r${round} ${variant.name}`, server.name, measured))
        }
        console.log(
          row([`r${round} ${variant.name}`, "ratio ours/bare", `${fmt(results.ours.at(-1)!.rps / results.bare.at(-1)!.rps, 2)}x`])
        )
      }
      summaries.push({
        name: variant.name,
        ours: summarise(results.ours),
        bare: summarise(results.bare),
        ratio: median(results.ours.map((m, i) => m.rps / results.bare[i]!.rps))
      })
    }
    console.log("")
    for (const { name, ours, bare, ratio } of summaries) {
      console.log(
        `${name}: ${fmt(ratio, 2)}x bare (ours ${fmt(ours.rps)} req/s p99 ${fmt(ours.p99)} ms, ` +
          `bare ${fmt(bare.rps)} req/s p99 ${fmt(bare.p99)} ms; p99 ${fmt(ours.p99 / Math.max(1, bare.p99), 1)}x)`
      )
    }
    const failures = summaries.reduce((n, s) => n + s.ours.non2xx + s.bare.non2xx, 0)
    if (failures > 0) {
      console.error(`!!!!! ${failures} requests did not succeed: the figures above are not comparable !!!!!`)
      process.exitCode = 1
    }
  } finally {
    for (const server of [...running].reverse()) await stop(server)
    rmSync(dataDir, { recursive: true, force: true })
  }
}

main()
  .catch((error) => {
    console.error(error instanceof Error ? error.message : error)
    process.exitCode = 1
  })
  .finally(() => process.exit())
