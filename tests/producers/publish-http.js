#!/usr/bin/env node
'use strict';
// Publishes reminders through `once serve` as a producer with nothing but fetch would:
//   ONCE_SERVE_TOKEN=... node publish-http.js --url http://HOST:PORT --queue NAME --count N
//                                            [--duplicate-every K] [--prefix P]
// One POST /v1/queue/publish per message, the reminder's JSON text as the payload and an
// idempotency_key per reminder; every K-th reminder is published a second time with the
// same key, as a producer that lost the first answer retries. A 429 or 503 is retried
// after its Retry-After.

const { reminderJson, run } = require('./common');
const { call } = require('./http');

async function publish(options) {
  for (let i = 1; i <= options.count; i++) {
    const body = {
      queue: options.target,
      payload: reminderJson(i, options.prefix),
      idempotency_key: `${options.prefix}publish-${i}`,
    };
    const times = options.duplicateEvery > 0 && i % options.duplicateEvery === 0 ? 2 : 1;
    for (let t = 0; t < times; t++) {
      const answer = await call(options.url, '/v1/queue/publish', body);
      if (typeof answer.message_id !== 'string') throw new Error(`publish ${i}: no message_id in the answer`);
    }
  }
}

run('publish-http.js', 'queue', publish);
