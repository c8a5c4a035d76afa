#!/usr/bin/env node
'use strict';
// Publishes reminders to a Kafka topic as an ordinary kafkajs producer would, for once's
// broker tests:
//   node publish-kafka.js --url kafka://HOST:PORT/TOPIC[?brokers=HOST:PORT,...] --topic NAME
//                         --count N [--duplicate-every K] [--prefix P]
// Each message is keyed by the reminder's user (a user's reminders stay in order on one
// partition), its value the reminder JSON, without once's headers: once takes
// TOPIC/PARTITION/OFFSET as its id. A duplicate is a second message with the same bytes.

const { Kafka, logLevel } = require('kafkajs');
const { messages, run } = require('./common');

const BATCH = 500;

async function publish(options) {
  const url = new URL(options.url);
  const brokers = [url.host];
  const more = url.searchParams.get('brokers');
  if (more) brokers.push(...more.split(',').filter((b) => b && b !== url.host));
  const kafka = new Kafka({ clientId: 'once-test-producer', brokers, logLevel: logLevel.ERROR, retry: { retries: 3 } });
  // Not idempotent: librdkafka's mock cluster answers InitProducerId naming a broker
  // kafkajs does not find in its metadata. A retried batch may then land twice, which is
  // what once is for.
  const producer = kafka.producer({ allowAutoTopicCreation: true });
  await producer.connect();
  try {
    let batch = [];
    const flush = async () => {
      if (batch.length === 0) return;
      await producer.send({ topic: options.target, acks: -1, messages: batch });
      batch = [];
    };
    for (const json of messages(options)) {
      batch.push({ key: JSON.parse(json).user_id, value: json, timestamp: String(Date.now()) });
      if (batch.length >= BATCH) await flush();
    }
    await flush();
  } finally {
    await producer.disconnect();
  }
}

run('publish-kafka.js', 'topic', publish);
