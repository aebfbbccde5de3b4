// The client against a running Mnemos: MNEMOS_URL is its base URL and
// MNEMOS_API_KEY a key of a tenant with nothing in it yet. tests/tsclient
// starts one and runs this (go test ./tests/tsclient with MNEMOS_TEST_NODE).

import assert from "node:assert/strict";
import { test } from "node:test";

import { Client, MnemosError, type Schemas } from "../src/index.js";

function env(name: string): string {
  const v = process.env[name];
  if (v === undefined || v === "") {
    throw new Error(`${name} is not set: run this through go test ./tests/tsclient, which starts a server`);
  }
  return v;
}

const client = new Client({ baseUrl: env("MNEMOS_URL"), apiKey: env("MNEMOS_API_KEY") });

/** rejects asserts that p fails with a MnemosError of status and code. */
async function rejects(p: Promise<unknown>, status: number, code: string): Promise<MnemosError> {
  try {
    await p;
  } catch (e) {
    assert.ok(e instanceof MnemosError, `want a MnemosError, got ${String(e)}`);
    assert.equal(e.status, status);
    assert.equal(e.code, code);
    return e;
  }
  assert.fail(`want ${status} ${code}, the call succeeded`);
}

test("health and the document", async () => {
  const health = await client.get("/healthz");
  assert.equal(health.status, "ok");
  const doc = await client.get("/openapi.json");
  assert.equal(doc.openapi, "3.1.0");
});

test("a turn is accepted once", async () => {
  const event = {
    schema: "mnemos.turn.v1" as const,
    event_id: "ts-1",
    session_id: "ts-session",
    seq: 1,
    occurred_at: "2026-11-22T10:00:00Z",
    input_messages: [{ uuid: "u1", role: "user" as const, content: "How do I release?" }],
    response: { uuid: "a1", role: "assistant" as const, content: [{ type: "text", text: "Tag it." }], stop_reason: "end_turn" },
    usage: { input_tokens: 12, output_tokens: 3 },
  };
  const first: Schemas["TurnAccepted"] = await client.post("/v1/turns", { body: event });
  assert.equal(first.event_id, "ts-1");
  assert.equal(first.duplicate, false);
  const again = await client.post("/v1/turns", { body: event });
  assert.equal(again.duplicate, true);
});

test("an error answer is a MnemosError with the API's code", async () => {
  await rejects(client.get("/v1/sessions/{id}", { path: { id: "nobody" } }), 404, "not_found");
  await rejects(client.get("/v1/sessions/{id}", { path: { id: "not a session id" } }), 400, "bad_session_id");
  const stranger = new Client({ baseUrl: env("MNEMOS_URL"), apiKey: "no-such-key" });
  await rejects(stranger.get("/v1/sessions"), 401, "unauthorized");
});

test("a preflight counts messages not sent yet", async () => {
  const p: Schemas["Preflight"] = await client.post("/v1/sessions/{id}/preflight", {
    path: { id: "ts-fresh" },
    body: { input_messages: [{ uuid: "p1", role: "user", content: [{ type: "text", text: "and now?" }] }] },
  });
  assert.ok(p.count > 0, `count ${p.count}`);
  assert.equal(p.state, "ok");
  assert.equal(p.blocked, false);
});

test("memories: write, read, list, index", async () => {
  const scope = "project:ts-client";
  const markdown = "---\nname: release-steps\ndescription: How this project releases\ntype: project\n---\nTag the commit, then push the tag.\n";
  const created: Schemas["Memory"] = await client.put("/v1/scopes/{scope}/memories/{name}", {
    path: { scope, name: "release-steps" },
    markdown,
    headers: { "Mnemos-Reason": "the TypeScript client's test" },
  });
  assert.equal(created.op, "created");
  assert.equal(created.revision, 1);

  const read = await client.get("/v1/scopes/{scope}/memories/{name}", { path: { scope, name: "release-steps" } });
  assert.equal(read.description, "How this project releases");
  assert.match(read.body ?? "", /push the tag/);

  const list: Schemas["MemoryList"] = await client.get("/v1/scopes/{scope}/memories", { path: { scope } });
  assert.deepEqual(list.memories.map((m) => m.name), ["release-steps"]);

  const index = await client.get("/v1/scopes/{scope}/index", { path: { scope } });
  assert.match(index.content, /release-steps/);
  assert.equal(index.loaded.cut, false);

  const scopes = await client.get("/v1/scopes", { query: { limit: 10 } });
  assert.ok(scopes.items.some((s) => s.scope === scope));
});

test("usage and the session list answer their shapes", async () => {
  const usage: Schemas["TenantUsage"] = await client.get("/v1/usage");
  assert.ok(Array.isArray(usage.rows));
  assert.equal(usage.total.calls, 0);
  assert.equal(usage.budget.exhausted, false);
  const sessions: Schemas["SessionList"] = await client.get("/v1/sessions", { query: { limit: 5 } });
  assert.ok(Array.isArray(sessions.items));
  assert.equal(typeof sessions.next_cursor, "string");
});

test("a scope's erasure removes its memories, and a second finds nothing", async () => {
  const scope = "project:ts-erased";
  await client.put("/v1/scopes/{scope}/memories/{name}", {
    path: { scope, name: "to-forget" },
    markdown: "---\nname: to-forget\ndescription: Erased by the test\ntype: project\n---\nNothing to keep.\n",
  });
  const erased: Schemas["Erasure"] = await client.delete("/v1/scopes/{scope}", { path: { scope } });
  assert.equal(erased.kind, "scope");
  assert.equal(erased.target, scope);
  assert.ok(erased.tables.some((t) => t.table === "memories" && t.rows === 1));
  await rejects(client.get("/v1/scopes/{scope}/memories/{name}", { path: { scope, name: "to-forget" } }), 404, "not_found");
  await rejects(client.delete("/v1/scopes/{scope}", { path: { scope } }), 404, "not_found");
  await rejects(client.delete("/v1/sessions/{id}", { path: { id: "never-was" } }), 404, "not_found");
});
