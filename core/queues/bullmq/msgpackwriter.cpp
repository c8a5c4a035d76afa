#include "queues/bullmq/msgpackwriter.h"

namespace once {

void MsgPackWriter::bigEndian(quint64 value, int bytes)
{
    for (int shift = (bytes - 1) * 8; shift >= 0; shift -= 8)
        m_bytes.append(char((value >> shift) & 0xff));
}

// A size in the type's fix form when it fits, else in its 16 or 32 bit form.
void MsgPackWriter::header(quint8 fixed, int fixedLimit, quint8 sixteen, quint8 thirtyTwo, qint64 size)
{
    if (size < fixedLimit) {
        m_bytes.append(char(fixed | quint8(size)));
    } else if (size <= 0xffff) {
        m_bytes.append(char(sixteen));
        bigEndian(quint64(size), 2);
    } else {
        m_bytes.append(char(thirtyTwo));
        bigEndian(quint64(size), 4);
    }
}

MsgPackWriter &MsgPackWriter::map(int entries)
{
    header(0x80, 16, 0xde, 0xdf, entries);
    return *this;
}

MsgPackWriter &MsgPackWriter::array(int elements)
{
    header(0x90, 16, 0xdc, 0xdd, elements);
    return *this;
}

MsgPackWriter &MsgPackWriter::string(const QByteArray &text)
{
    // str8 (0xd9) is left out: cmsgpack reads it, but the 16 bit form serves too.
    header(0xa0, 32, 0xda, 0xdb, text.size());
    m_bytes.append(text);
    return *this;
}

MsgPackWriter &MsgPackWriter::integer(qint64 value)
{
    if (value >= 0 && value < 128) {
        m_bytes.append(char(value));
    } else if (value < 0 && value >= -32) {
        m_bytes.append(char(quint8(0xe0 | (value + 32))));
    } else {
        m_bytes.append(char(0xd3)); // int 64
        bigEndian(quint64(value), 8);
    }
    return *this;
}

MsgPackWriter &MsgPackWriter::boolean(bool value)
{
    m_bytes.append(char(value ? 0xc3 : 0xc2));
    return *this;
}

MsgPackWriter &MsgPackWriter::nil()
{
    m_bytes.append(char(0xc0));
    return *this;
}

QByteArray MsgPackWriter::stringArray(const QByteArrayList &texts)
{
    MsgPackWriter writer;
    writer.array(int(texts.size()));
    for (const QByteArray &text : texts)
        writer.string(text);
    return writer.bytes();
}

} // namespace once
