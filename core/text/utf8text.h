#pragma once

#include <QByteArrayView>
#include <QString>
#include <QStringDecoder>

namespace once {

// UTF-8 as text, every character kept. Not QString::fromUtf8, which drops a byte order
// mark that opens the bytes: an id or a JSON string may begin with U+FEFF like with any
// other character.
inline QString textOfUtf8(QByteArrayView utf8)
{
    QStringDecoder decoder(QStringDecoder::Utf8, QStringDecoder::Flag::ConvertInitialBom);
    return decoder(utf8);
}

} // namespace once
