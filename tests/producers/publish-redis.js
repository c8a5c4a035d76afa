#!/usr/bin/env node
'use strict';
// Publishes reminders to a Redis stream as an ordinary ioredis producer would, for
// once's broker tests:
//   node publish-redis.js --url redis://:PASS@HOST:PORT/0 --stream NAME --count N
//                         [--duplicate-every K] [--prefix P]
// Each message is one entry: XADD NAME * id <uuid> body <json> content_type
// application/json enqueued_at <ms>, pipelined in batches. `once init --queue URL`
// creates the stream and its consumer group; this script only checks the stream exists.

const crypto = require('node:crypto');
const { Redis } = require('ioredis');
const { messages, redactUrl, run } = require('./common');

const BATCH = 500; // XADDs per pipeline

async function publish(options) {
  const name = options.target;
  const redis = new Redis(options.url, {
    lazyConnect: true,
    // A test producer fails at once instead of reconnecting or queueing commands.
    retryStrategy: () => null,
    enableOfflineQueue: false,
    maxRetriesPerRequest: 0,
    connectTimeout: 10_000,
  });
  // The cause of a failed connection (refused, WRONGPASS, NOAUTH) comes as an 'error'
  // event; the awaited call only says "Connection is closed".
  let lastError = null;
  redis.on('error', (err) => {
    lastError = err;
  });
  try {
    try {
      await redis.connect();
      await redis.ping();
    } catch (err) {
      throw new Error(`cannot connect to ${redactUrl(options.url)}: ${(lastError || err).message}`);
    }
    const type = await redis.type(name);
    if (type !== 'stream')
      throw new Error(
        type === 'none'
          ? `stream "${name}" does not exist at ${redactUrl(options.url)}; ` +
              `create it first with: once init --queue '${redactUrl(options.url)}?stream=${name}'`
          : `key "${name}" at ${redactUrl(options.url)} is a ${type}, not a stream`,
      );

    let pipeline = redis.pipeline();
    const flush = async () => {
      if (pipeline.length === 0) return;
      const results = await pipeline.exec();
      pipeline = redis.pipeline();
      for (const [err] of results) if (err) throw err;
    };
    for (const json of messages(options)) {
      pipeline.xadd(name, '*', 'id', crypto.randomUUID(), 'body', json, 'content_type', 'application/json',
                    'enqueued_at', String(Date.now()));
      if (pipeline.length >= BATCH) await flush();
    }
    await flush();
    await redis.quit();
  } finally {
    redis.disconnect();
  }
}

run('publish-redis.js', 'stream', publish);
