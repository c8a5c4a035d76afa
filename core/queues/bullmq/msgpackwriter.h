#pragma once

#include <QByteArray>
#include <QByteArrayList>

namespace once {

// MessagePack, the little of it that BullMQ's scripts unpack with cmsgpack: maps, arrays,
// strings, integers, booleans and nil. Each call appends one value; a map or an array is
// its header followed by its entries' values.
class MsgPackWriter
{
public:
    MsgPackWriter &map(int entries);
    MsgPackWriter &array(int elements);
    MsgPackWriter &string(const QByteArray &text);
    MsgPackWriter &integer(qint64 value);
    MsgPackWriter &boolean(bool value);
    MsgPackWriter &nil();

    // An array of strings, as BullMQ packs a list of job ids.
    static QByteArray stringArray(const QByteArrayList &texts);

    QByteArray bytes() const { return m_bytes; }

private:
    void header(quint8 fixed, int fixedLimit, quint8 sixteen, quint8 thirtyTwo, qint64 size);
    void bigEndian(quint64 value, int bytes);

    QByteArray m_bytes;
};

} // namespace once
