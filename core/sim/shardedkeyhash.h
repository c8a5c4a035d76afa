#pragma once

#include <QByteArray>
#include <QHash>

#include <algorithm>
#include <array>

namespace once {

// Idempotency keys and what the partner did for each, in many small hashes instead of
// one. A QHash grows by doubling all at once: at 65,536 keys the simulator stopped
// answering for 30-50 ms while it moved them, the same pause at every later doubling,
// and a benchmark at 10,000 reminders/s counted the partner's pause as the worker's
// latency. Split 256 ways, each doubling moves a 256th of the keys.
template<typename T>
class ShardedKeyHash
{
public:
    static constexpr int Shards = 256;
    static_assert(Shards <= 256, "shards are picked by a hash's top 8 bits");

    const T *find(const QByteArray &key) const
    {
        const QHash<QByteArray, T> &shard = shardOf(key);
        const auto it = shard.constFind(key);
        return it == shard.constEnd() ? nullptr : &it.value();
    }
    T *find(const QByteArray &key)
    {
        QHash<QByteArray, T> &shard = shardOf(key);
        const auto it = shard.find(key);
        return it == shard.end() ? nullptr : &it.value();
    }
    // The key's value, made default if it has none.
    T &operator[](const QByteArray &key) { return shardOf(key)[key]; }
    void insert(const QByteArray &key, T value) { shardOf(key).insert(key, std::move(value)); }

    qsizetype size() const
    {
        qsizetype total = 0;
        for (const auto &shard : m_shards)
            total += shard.size();
        return total;
    }
    // The most keys one doubling can move.
    qsizetype largestShard() const
    {
        qsizetype largest = 0;
        for (const auto &shard : m_shards)
            largest = std::max(largest, shard.size());
        return largest;
    }
    // Calls visit(key, value) for every key, in no particular order.
    template<typename Visit>
    void forEach(Visit visit) const
    {
        for (const auto &shard : m_shards)
            for (auto it = shard.cbegin(); it != shard.cend(); ++it)
                visit(it.key(), it.value());
    }
    QHash<QByteArray, T> toHash() const
    {
        QHash<QByteArray, T> all;
        all.reserve(size());
        forEach([&all](const QByteArray &key, const T &value) { all.insert(key, value); });
        return all;
    }

private:
    // By the top bits of a hash of a seed of its own: a shard's own buckets are picked
    // by the low bits of its seeded hash, which QT_HASH_SEED=0 would make this one.
    static std::size_t shardIndex(const QByteArray &key)
    {
        return (qHash(key, ShardSeed) >> (8 * sizeof(std::size_t) - 8)) % Shards;
    }
    QHash<QByteArray, T> &shardOf(const QByteArray &key) { return m_shards[shardIndex(key)]; }
    const QHash<QByteArray, T> &shardOf(const QByteArray &key) const { return m_shards[shardIndex(key)]; }

    static constexpr std::size_t ShardSeed = 0x9e3779b9;
    std::array<QHash<QByteArray, T>, Shards> m_shards;
};

} // namespace once
