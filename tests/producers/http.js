'use strict';
// What the fetch-only clients of `once serve` share: one JSON call with the bearer token
// from ONCE_SERVE_TOKEN, retried after Retry-After on 429 and 503, an error line
// otherwise (never with the token in it).

const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));

async function call(base, path, body, attempts = 10) {
  const token = process.env.ONCE_SERVE_TOKEN || '';
  for (let attempt = 1; ; attempt++) {
    const response = await fetch(base + path, {
      method: 'POST',
      headers: { 'content-type': 'application/json', ...(token ? { authorization: `Bearer ${token}` } : {}) },
      body: JSON.stringify(body),
    });
    const text = await response.text();
    if (response.ok) return JSON.parse(text);
    if ((response.status === 429 || response.status === 503) && attempt < attempts) {
      await sleep(1000 * Math.max(1, Number(response.headers.get('retry-after')) || 1));
      continue;
    }
    const error = new Error(`${path}: HTTP ${response.status}: ${text.slice(0, 300)}`);
    error.status = response.status;
    throw error;
  }
}

module.exports = { call, sleep };
