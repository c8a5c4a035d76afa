'use strict';
// The partner both sides of scripts/bench-peer send to: Node's own http server on
// 127.0.0.1, answering every POST 200 at once, so that neither side waits on it. It
// applies every POST (no idempotency of its own): a repeated Idempotency-Key is a
// duplicate effect, which GET /stats tells as posts > keys.
//
//   node sink.js [--port P]   # 0 (default): any free port; the first line names it
//
// GET /stats answers {"posts": N, "keys": M}, the counts `once bench --partner-url`
// reads from a partner that offers them.

const http = require('node:http');
const { parseArgs } = require('node:util');

const { values } = parseArgs({ options: { port: { type: 'string', default: '0' } }, strict: true });
if (!/^\d+$/.test(values.port) || Number(values.port) > 65535) {
  console.error(`sink: --port must be a port number, not "${values.port}"`);
  process.exit(2);
}

let posts = 0;
const keys = new Set();

function answer(res, status, body) {
  res.writeHead(status, { 'Content-Type': 'application/json', 'Content-Length': Buffer.byteLength(body) });
  res.end(body);
}

const server = http.createServer((req, res) => {
  if (req.method === 'POST') {
    // Answered once the whole body is in, as a partner that reads it would.
    req.resume();
    req.on('end', () => {
      posts += 1;
      const key = req.headers['idempotency-key'];
      if (key !== undefined)
        keys.add(key);
      answer(res, 200, `{"request_id":"req_${posts}"}`);
    });
  } else if (req.method === 'GET' && req.url === '/stats') {
    answer(res, 200, JSON.stringify({ posts, keys: keys.size }));
  } else {
    answer(res, 404, '{"error":"not found"}');
  }
});
server.listen(Number(values.port), '127.0.0.1', () => {
  console.log(`sink listening on http://127.0.0.1:${server.address().port}/reminders`);
});

for (const signal of ['SIGTERM', 'SIGINT'])
  process.on(signal, () => server.close(() => process.exit(0)).closeAllConnections());
