#!/usr/bin/env node
'use strict';
// Publishes reminders to RabbitMQ as an ordinary amqplib producer would, for once's
// broker tests:
//   node publish-amqp.js --url amqp://USER:PASS@HOST:PORT/%2F --queue NAME --count N
//                        [--duplicate-every K] [--prefix P]
// Each message goes to exchange NAME with routing key NAME on a confirm channel. Nothing
// is declared here: `once init --queue URL` declares the exchange and queue.

const crypto = require('node:crypto');
const { once } = require('node:events');
const amqp = require('amqplib');
const { messages, redactUrl, run, summary } = require('./common');

const BATCH = 500; // messages between waits for the broker's confirms

async function publish(options) {
  const name = options.target;
  let connection;
  try {
    connection = await amqp.connect(options.url);
  } catch (err) {
    // amqplib drops the reason the broker gave for refusing connection.open.
    const hint = /ConnectionOpenOk/.test(err.message)
      ? ' (the broker would not open the virtual host: it does not exist, or the user may not use it)'
      : '';
    throw new Error(`cannot connect to ${redactUrl(options.url)}: ${err.message}${hint}`);
  }
  // A server-closed channel or connection also emits 'error'; the awaited calls below
  // reject with the same error, so these only keep it from being thrown unhandled.
  connection.on('error', () => {});
  try {
    const channel = await connection.createConfirmChannel();
    channel.on('error', () => {});
    try {
      await channel.checkExchange(name);
    } catch (err) {
      if (err.code === 404)
        throw new Error(
          `exchange "${name}" does not exist at ${redactUrl(options.url)}; ` +
            `declare it first with: once init --queue '${redactUrl(options.url)}?queue=${name}'`,
        );
      throw err;
    }
    // mandatory: a message that no queue takes comes back instead of being dropped.
    let returned = 0;
    channel.on('return', () => {
      returned += 1;
    });

    let inBatch = 0;
    for (const json of messages(options)) {
      const now = Date.now();
      const ok = channel.publish(name, name, Buffer.from(json), {
        contentType: 'application/json',
        messageId: crypto.randomUUID(),
        persistent: true,
        mandatory: true,
        timestamp: Math.floor(now / 1000),
        headers: { 'x-once-enqueued-at': now },
      });
      if (!ok) await once(channel, 'drain');
      if (++inBatch === BATCH) {
        await channel.waitForConfirms();
        inBatch = 0;
      }
    }
    await channel.waitForConfirms();
    if (returned > 0)
      throw new Error(
        `${returned} of ${summary(options).total} messages were unroutable: exchange "${name}" ` +
          `has no queue bound with routing key "${name}" (run once init --queue)`,
      );
    await channel.close();
  } finally {
    await connection.close().catch(() => {});
  }
}

run('publish-amqp.js', 'queue', publish);
