#include "display/statuscolors.h"

#include <QPalette>

namespace once::ui {

bool isDarkPalette(const QPalette &palette)
{
    return palette.color(QPalette::Window).lightness() < 128;
}

QColor severityTextColor(Severity severity, const QPalette &palette)
{
    // Light theme: dark, saturated tones; dark theme: light tints of the same hues.
    // Both keep at least 4.5:1 contrast against the usual Base and Window colours.
    const bool dark = isDarkPalette(palette);
    switch (severity) {
    case Severity::Normal:
        return palette.color(QPalette::Text);
    case Severity::Good:
        return dark ? QColor(0x81, 0xc7, 0x84) : QColor(0x1b, 0x6e, 0x2c);
    case Severity::Warning:
        return dark ? QColor(0xff, 0xcc, 0x66) : QColor(0x8a, 0x55, 0x00);
    case Severity::Alert:
        return dark ? QColor(0xff, 0x8a, 0x80) : QColor(0xb3, 0x26, 0x1e);
    }
    return palette.color(QPalette::Text);
}

BannerColors bannerColors(Severity severity, const QPalette &palette)
{
    const bool dark = isDarkPalette(palette);
    switch (severity) {
    case Severity::Alert:
        return dark ? BannerColors{QColor(0x4a, 0x17, 0x14), QColor(0xff, 0xda, 0xd6),
                                   QColor(0xc2, 0x45, 0x3c)}
                    : BannerColors{QColor(0xfd, 0xe7, 0xe6), QColor(0x7a, 0x14, 0x10),
                                   QColor(0xe0, 0x57, 0x4f)};
    case Severity::Warning:
        return dark ? BannerColors{QColor(0x3f, 0x30, 0x00), QColor(0xff, 0xe7, 0xa8),
                                   QColor(0xb3, 0x86, 0x00)}
                    : BannerColors{QColor(0xff, 0xf4, 0xd6), QColor(0x5c, 0x3b, 0x00),
                                   QColor(0xe0, 0xa8, 0x00)};
    case Severity::Good:
        return dark ? BannerColors{QColor(0x17, 0x3a, 0x1c), QColor(0xd4, 0xf5, 0xd6),
                                   QColor(0x3f, 0x9a, 0x4a)}
                    : BannerColors{QColor(0xe6, 0xf4, 0xe7), QColor(0x12, 0x4d, 0x1e),
                                   QColor(0x5c, 0xb0, 0x66)};
    case Severity::Normal:
        break;
    }
    return BannerColors{palette.color(QPalette::AlternateBase), palette.color(QPalette::Text),
                        palette.color(QPalette::Mid)};
}

} // namespace once::ui
